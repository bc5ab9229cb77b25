//===- BraidOps.td - braid ops -----------------------------*- tablegen -*-===//
#ifndef BRAID_OPS_TD
#define BRAID_OPS_TD

include "dialect/BraidBase.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"

//===----------------------------------------------------------------------===//
// Interfaces
//===----------------------------------------------------------------------===//

def Braid_CollectiveOpInterface : OpInterface<"CollectiveOpInterface"> {
  let cppNamespace = "::mlir::braid";
  let description = [{
    Every collective, synchronous or the start of an asynchronous one:
    its group, its kind, whether it is async, the tensors it moves and the
    one that sizes it. Code that treats collectives alike (export, cost,
    stats, scheduling) asks this interface instead of switching over op
    classes.
  }];
  let methods = [
    InterfaceMethod<"The device group the collective runs over.",
      "::mlir::FlatSymbolRefAttr", "getGroupAttr">,
    InterfaceMethod<"What the collective does.",
      "::mlir::braid::CollectiveKind", "getCollectiveKind", (ins), [{}],
      [{ return ConcreteOp::kCollectiveKind; }]>,
    InterfaceMethod<"True for the `*_start` half of an async collective.",
      "bool", "isAsyncStart", (ins), [{}],
      [{ return ConcreteOp::template hasTrait<::mlir::OpTrait::BraidAsyncStart>(); }]>,
    InterfaceMethod<"The tensor this rank contributes (null for recv).",
      "::mlir::Value", "getSentValue", (ins), [{}],
      [{ return ::mlir::braid::detail::sentValue($_op.getOperation()); }]>,
    InterfaceMethod<[{The tensor type this rank receives: the result, or the
        payload of the start's handle; null for send.}],
      "::mlir::Type", "getReceivedType", (ins), [{}],
      [{ return ::mlir::braid::detail::receivedType($_op.getOperation()); }]>,
    InterfaceMethod<[{The tensor type whose bytes size the collective, as
        nccl-tests' `size` does (the cost model prices them, step statistics
        count them): the gathered result of all_gather, the received tensor
        of recv, the sent tensor otherwise.}],
      "::mlir::Type", "getSizingType", (ins), [{}],
      [{ return ::mlir::braid::detail::sizingType($_op.getOperation()); }]>,
  ];
}

//===----------------------------------------------------------------------===//
// Device groups
//===----------------------------------------------------------------------===//

def Braid_DeviceGroupOp : Braid_Op<"device_group", [Symbol]> {
  let summary = "A named group of ranks that collectives run over";
  let description = [{
    Declares a device group: `size` ranks that take part in the collectives
    naming it. In a tensor-parallel model there is usually one group, the
    TP group; pipeline or data parallelism add more.

    ```mlir
    braid.device_group @tp size 4
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, I64Attr:$size);
  let assemblyFormat = "$sym_name `size` $size attr-dict";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Parameters
//===----------------------------------------------------------------------===//

def Braid_ParameterOp : Braid_Op<"parameter", [Pure,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "This rank's slice of a named checkpoint tensor";
  let description = [{
    Produces this rank's slice of the checkpoint tensor `name` whose full
    shape is `full_shape`. Without `shard_dim` the tensor is replicated.
    With `shard_dim = d on @g`, dimension `d` is cut into `shards` equal
    pieces (default: the group size) and rank `r` of the group takes piece
    `r * shards / size` — so with fewer shards than ranks, consecutive ranks
    hold the same piece (replicated KV heads in grouped-query attention).
    With `blocks = b`, dimension `d` is first viewed as `b` equal blocks
    (e.g. a fused QKV weight) and the rank's slice is its piece of every
    block, concatenated. With `padded_shape`, the full tensor is first
    zero-padded at the end of each dimension to that shape (Megatron pads
    the vocabulary to a multiple of the TP degree); slicing applies to the
    padded tensor.

    ```mlir
    // HF Linear weight [out, in], column-parallel over 4 ranks.
    %w = braid.parameter "model.layers.0.self_attn.q_proj.weight"
           full [4096, 4096] shard_dim 0 on @tp : tensor<1024x4096xbf16>
    // GPT-2 fused c_attn (Conv1D [in, 3*out]): q, k and v each cut.
    %c = braid.parameter "h.0.attn.c_attn.weight"
           full [768, 2304] shard_dim 1 on @tp {blocks = 3 : i64} : tensor<768x576xf32>
    ```
  }];
  let arguments = (ins StrAttr:$name, DenseI64ArrayAttr:$full_shape,
                       OptionalAttr<I64Attr>:$shard_dim,
                       OptionalAttr<FlatSymbolRefAttr>:$group,
                       OptionalAttr<I64Attr>:$shards,
                       OptionalAttr<I64Attr>:$blocks,
                       OptionalAttr<DenseI64ArrayAttr>:$padded_shape);
  let results = (outs Braid_Tensor:$result);
  let assemblyFormat = [{
    $name `full` $full_shape (`shard_dim` $shard_dim^ `on` $group)? attr-dict `:` type($result)
  }];
  let extraClassDeclaration = [{
    /// Number of distinct slices along the shard dim (1 when replicated).
    int64_t getNumShards(int64_t groupSize);
    /// Number of blocks the shard dim is viewed as (1 unless fused).
    int64_t getNumBlocks() { return getBlocks().value_or(1); }
  }];
}

def Braid_ParameterPackOp : Braid_Op<"parameter_pack", [Pure]> {
  let summary = "Parameters laid end to end along dim 0, as one weight";
  let description = [{
    This rank's slices of the `pieces` (each a `braid.parameter` result)
    concatenated along dimension 0: a fused weight such as Q, K and V
    projections read by one matmul. The pieces keep their own names and
    shard rules, so checkpoints and synthetic weights still load each one
    by name, bit for bit; the runtimes store every piece inside its pack,
    so the pack is a view over them and costs nothing per step.
    `braid-fuse-compute` creates it for horizontally fused matmuls.

    The pieces share their element type and every dimension but the first;
    the result's first dimension is the sum of theirs.

    ```mlir
    %q = braid.parameter "model.layers.0.self_attn.q_proj.weight" full [4096, 4096] shard_dim 0 on @tp : tensor<512x4096xbf16>
    %k = braid.parameter "model.layers.0.self_attn.k_proj.weight" full [1024, 4096] shard_dim 0 on @tp : tensor<128x4096xbf16>
    %v = braid.parameter "model.layers.0.self_attn.v_proj.weight" full [1024, 4096] shard_dim 0 on @tp : tensor<128x4096xbf16>
    %qkv = braid.parameter_pack %q, %k, %v : (tensor<512x4096xbf16>, tensor<128x4096xbf16>, tensor<128x4096xbf16>) -> tensor<768x4096xbf16>
    ```
  }];
  let arguments = (ins Variadic<Braid_Tensor>:$pieces);
  let results = (outs Braid_Tensor:$result);
  let assemblyFormat = "$pieces attr-dict `:` functional-type($pieces, results)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Compute ops
//===----------------------------------------------------------------------===//

def Braid_MatmulOp : Braid_Op<"matmul", [Pure, AttrSizedOperandSegments]> {
  let summary = "Matrix multiply with optional operand transposes and epilogue";
  let description = [{
    `a` is `[..., M, K]` (`[..., K, M]` with `transpose_a`), `b` is `[K, N]`
    (`[N, K]` with `transpose_b`) or carries the same leading batch dims as
    `a`. The result is `[..., M, N]`. Accumulation is fp32 whatever the
    element type. Hugging Face `nn.Linear` weights are `[out, in]`, so a
    projection is `matmul %x, %w {transpose_b}`.

    Epilogue: with `bias` (`[N]`, the result's element type) the bias is
    added to every row, then with `residual` (the result's type) the
    residual, or with `gelu` the GELU (`tanh` or `none`, as `braid.gelu`);
    all on the fp32 accumulator before the one rounding to the storage
    type: cuBLASLt's `BIAS`/`GELU_BIAS` epilogues, and its `C` input with
    beta 1 for the residual (which cuBLASLt adds before an activation, so a
    matmul has a residual or a GELU, not both). `braid-fuse-compute` forms
    them from a matmul whose only reader is the bias add (and the add's,
    the GELU or the residual add); in f32 the result is bit for bit the
    separate ops'.

    ```mlir
    %y = braid.matmul %x, %w {transpose_b} : (tensor<2x16x512xbf16>, tensor<128x512xbf16>) -> tensor<2x16x128xbf16>
    %h = braid.matmul %x, %w bias %b gelu tanh : (tensor<1x8x768xf32>, tensor<768x3072xf32>, tensor<3072xf32>) -> tensor<1x8x3072xf32>
    %o = braid.matmul %h, %w2 bias %b2 residual %x : (tensor<1x8x3072xf32>, tensor<3072x768xf32>, tensor<768xf32>, tensor<1x8x768xf32>) -> tensor<1x8x768xf32>
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$a, Braid_FloatTensor:$b,
                       Optional<Braid_FloatTensor>:$bias,
                       Optional<Braid_FloatTensor>:$residual,
                       UnitAttr:$transpose_a, UnitAttr:$transpose_b,
                       OptionalAttr<Braid_GeluApprox>:$gelu);
  let results = (outs Braid_FloatTensor:$result);
  let assemblyFormat = [{
    $a `,` $b (`bias` $bias^)? (`residual` $residual^)? (`gelu` $gelu^)? attr-dict `:` functional-type(operands, results)
  }];
  let builders = [
    // A plain matmul, no epilogue.
    OpBuilder<(ins "::mlir::Type":$result, "::mlir::Value":$a,
                   "::mlir::Value":$b, "bool":$transposeA,
                   "bool":$transposeB), [{
      build($_builder, $_state, result, a, b, /*bias=*/::mlir::Value(),
            /*residual=*/::mlir::Value(), transposeA, transposeB,
            /*gelu=*/nullptr);
    }]>
  ];
  let hasVerifier = 1;
}

class Braid_BroadcastBinaryOp<string mnemonic, string what>
    : Braid_Op<mnemonic, [Pure]> {
  let summary = "Elementwise " # what # " with trailing broadcast of rhs";
  let description = [{
    `rhs` broadcasts against `lhs` numpy-style from the trailing dimension:
    its rank is at most `lhs`'s and each of its dimensions equals `lhs`'s
    or is 1. The result has `lhs`'s type. A bias add is `lhs [..., N]` with
    `rhs [N]`.

    ```mlir
    %z = braid.}] # mnemonic # [{ %x, %b : (tensor<2x16x512xbf16>, tensor<512xbf16>) -> tensor<2x16x512xbf16>
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$lhs, Braid_FloatTensor:$rhs);
  let results = (outs Braid_FloatTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}
def Braid_AddOp : Braid_BroadcastBinaryOp<"add", "addition">;
def Braid_MulOp : Braid_BroadcastBinaryOp<"mul", "multiplication">;

def Braid_RmsNormOp : Braid_Op<"rms_norm", [Pure]> {
  let summary = "RMSNorm over the last dimension";
  let description = [{
    `y = x / sqrt(mean(x^2, -1) + epsilon) * weight`, with `weight` of shape
    `[H]` for `x` of shape `[..., H]` (LLaMA's `LlamaRMSNorm`).

    ```mlir
    %y = braid.rms_norm %x, %w {epsilon = 1.0e-05 : f64} : (tensor<2x16x512xbf16>, tensor<512xbf16>) -> tensor<2x16x512xbf16>
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$input, Braid_FloatTensor:$weight, F64Attr:$epsilon);
  let results = (outs Braid_FloatTensor:$result);
  let assemblyFormat = "$input `,` $weight attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Braid_AddRmsNormOp : Braid_Op<"add_rms_norm", [Pure]> {
  let summary = "Residual add and RMSNorm of the sum, one op with both results";
  let description = [{
    `sum = input + residual` (one type, no broadcasting), rounded to the
    storage type, and `result = rms_norm(sum, weight)` read from that
    rounded sum: exactly `braid.add` then `braid.rms_norm`, in every dtype,
    as one op that reads the row once (vLLM's and TensorRT-LLM's
    `fused_add_rms_norm`). `braid-fuse-compute` forms it from the pair; the
    sum goes on as the residual stream.

    ```mlir
    %s, %y = braid.add_rms_norm %x, %r, %w {epsilon = 1.0e-05 : f64}
        : (tensor<1x1x4096xbf16>, tensor<1x1x4096xbf16>, tensor<4096xbf16>)
        -> (tensor<1x1x4096xbf16>, tensor<1x1x4096xbf16>)
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$input, Braid_FloatTensor:$residual,
                       Braid_FloatTensor:$weight, F64Attr:$epsilon);
  let results = (outs Braid_FloatTensor:$sum, Braid_FloatTensor:$result);
  let assemblyFormat = "$input `,` $residual `,` $weight attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Braid_LayerNormOp : Braid_Op<"layer_norm", [Pure]> {
  let summary = "LayerNorm over the last dimension";
  let description = [{
    `y = (x - mean) / sqrt(var + epsilon) * weight + bias` over the last
    dimension; `weight` and `bias` are `[H]` (GPT-2's `ln_1`, `ln_2`, `ln_f`).

    ```mlir
    %y = braid.layer_norm %x, %g, %b {epsilon = 1.0e-05 : f64} : (tensor<1x8x768xf32>, tensor<768xf32>, tensor<768xf32>) -> tensor<1x8x768xf32>
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$input, Braid_FloatTensor:$weight,
                       Braid_FloatTensor:$bias, F64Attr:$epsilon);
  let results = (outs Braid_FloatTensor:$result);
  let assemblyFormat = "$input `,` $weight `,` $bias attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Braid_RopeOp : Braid_Op<"rope", [Pure]> {
  let summary = "Rotary position embedding (rotate-half form)";
  let description = [{
    Rotates `x` of shape `[B, S, H, D]` by the positions `[B, S]` with
    frequencies `theta^(-2i/D)`, pairing element `i` with `i + D/2` as
    Hugging Face's `rotate_half` does. `D` must be even.

    Scaled RoPE (linear, llama3, yarn, ...) gives the frequencies instead:
    `inv_freq` holds one positive, finite frequency per pair (`D/2` of them;
    `theta` is then only the base they were derived from), and
    `attention_factor` (default 1) multiplies cos and sin, as transformers'
    `attention_scaling` does for yarn.

    Partial rotary (GPT-NeoX's `rotary_pct`): with `rotary_dim` R (even,
    at most D) only the first R elements of each head rotate, element `i`
    paired with `i + R/2` at frequency `theta^(-2i/R)` (or `inv_freq`, then
    R/2 long); elements `[R, D)` pass through unchanged.

    ```mlir
    %r = braid.rope %q, %pos {theta = 5.0e+05 : f64} : (tensor<2x16x8x64xbf16>, tensor<2x16xi32>) -> tensor<2x16x8x64xbf16>
    %s = braid.rope %q, %pos {theta = 1.0e+04 : f64, inv_freq = array<f64: 1.0, 0.25>, attention_factor = 1.2 : f64} : (tensor<1x4x2x4xf32>, tensor<1x4xi32>) -> tensor<1x4x2x4xf32>
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$input, Braid_IntTensor:$positions, F64Attr:$theta,
                       OptionalAttr<DenseF64ArrayAttr>:$inv_freq,
                       OptionalAttr<F64Attr>:$attention_factor,
                       OptionalAttr<I64Attr>:$rotary_dim);
  let results = (outs Braid_FloatTensor:$result);
  let assemblyFormat = "$input `,` $positions attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Braid_AttentionOp : Braid_Op<"attention", [Pure, AttrSizedOperandSegments]> {
  let summary = "Scaled dot-product attention with GQA and an optional KV cache";
  let description = [{
    `q` is `[B, S, num_heads, head_dim]`, `k` and `v` are
    `[B, S, num_kv_heads, head_dim]`; query head `h` attends with KV head
    `h / (num_heads / num_kv_heads)`. `scale` defaults to `1/sqrt(head_dim)`.
    With `causal`, token `i` attends to tokens `<= i`; with `sliding_window`
    `W` (causal only), to the `W` tokens `(i - W, i]` (Mistral's and Qwen's
    sliding-window layers; with a cache, positions count from 0 as above).

    With a KV cache (`cache(%kc, %vc) at %pos`): the caches are
    `[Bc, max_seq, num_kv_heads, head_dim]` with `Bc >= B` (a decode batch
    bucket runs the first B of the cache's sequences) and `%pos` is `[B]`
    (the position of the first new token of each sequence). The new `k`, `v` are written
    at `[pos, pos + S)`, each query attends to cache entries `[0, pos + i]`
    (causal) and the op also returns the updated caches. State is explicit
    SSA: the entry function threads the caches in and out.

    ```mlir
    %o, %kc2, %vc2 = braid.attention %q, %k, %v cache(%kc, %vc) at %pos
        {causal, num_heads = 8 : i64, num_kv_heads = 2 : i64, head_dim = 64 : i64}
        : (...) -> (tensor<2x1x8x64xbf16>, tensor<2x128x2x64xbf16>, tensor<2x128x2x64xbf16>)
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$q, Braid_FloatTensor:$k, Braid_FloatTensor:$v,
                       Optional<Braid_FloatTensor>:$k_cache,
                       Optional<Braid_FloatTensor>:$v_cache,
                       Optional<Braid_IntTensor>:$position,
                       UnitAttr:$causal, I64Attr:$num_heads, I64Attr:$num_kv_heads,
                       I64Attr:$head_dim, OptionalAttr<F64Attr>:$scale,
                       OptionalAttr<I64Attr>:$sliding_window);
  let results = (outs Braid_FloatTensor:$output, Variadic<Braid_FloatTensor>:$updated_cache);
  let assemblyFormat = [{
    $q `,` $k `,` $v (`cache` `(` $k_cache^ `,` $v_cache `)` `at` $position)?
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    bool hasCache() { return getKCache() != nullptr; }
    double getScaleOrDefault();
  }];
}

class Braid_UnaryOp<string mnemonic>
    : Braid_Op<mnemonic, [Pure, SameOperandsAndResultType]> {
  let arguments = (ins Braid_FloatTensor:$input);
  let results = (outs Braid_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def Braid_SiluOp : Braid_UnaryOp<"silu"> {
  let summary = "SiLU (swish): x * sigmoid(x)";
  let description = [{
    ```mlir
    %y = braid.silu %x : tensor<2x16x1376xbf16>
    ```
  }];
}

def Braid_SwigluOp : Braid_Op<"swiglu", [Pure, SameOperandsAndResultType]> {
  let summary = "SwiGLU: silu(gate) * up, one op";
  let description = [{
    `y = silu(gate) * up` elementwise, both operands and the result of one
    type (no broadcasting). LLaMA's MLP computes `silu(gate_proj(x)) *
    up_proj(x)`; `braid-fuse-compute` forms this op from that `braid.silu`
    and `braid.mul`, so the pair is one launch that reads `gate` and `up`
    once and writes `y` once. Computed in f32 and rounded once to the
    storage type: bit for bit the pair in f32; in bf16 or f16 the pair
    rounds the silu result once more.

    ```mlir
    %y = braid.swiglu %gate, %up : tensor<1x1x3584xbf16>
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$gate, Braid_FloatTensor:$up);
  let results = (outs Braid_FloatTensor:$result);
  let assemblyFormat = "$gate `,` $up attr-dict `:` type($result)";
}

def Braid_GeluOp : Braid_Op<"gelu", [Pure, SameOperandsAndResultType]> {
  let summary = "GELU, exact (erf) or tanh-approximated";
  let description = [{
    `approximation` is `none` (erf) or `tanh` (GPT-2's `gelu_new`).

    ```mlir
    %y = braid.gelu tanh %x : tensor<1x8x3072xf32>
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$input, Braid_GeluApprox:$approximation);
  let results = (outs Braid_FloatTensor:$result);
  let assemblyFormat = "$approximation $input attr-dict `:` type($result)";
}

def Braid_ActivationOp : Braid_Op<"activation",
    [Pure, SameOperandsAndResultType]> {
  let summary = "An elementwise activation other than SiLU and GELU";
  let description = [{
    `kind` names the function as transformers' `ACT2FN` does, computed in
    f32 and rounded once to the storage type:

    | kind | y |
    |---|---|
    | `relu` | max(x, 0) |
    | `relu2` | max(x, 0)^2 |
    | `relu6` | min(max(x, 0), 6) |
    | `leaky_relu` | x if x >= 0, else 0.01 x (PyTorch's default slope) |
    | `quick_gelu` | x sigmoid(1.702 x) |
    | `sigmoid` | 1 / (1 + exp(-x)) |
    | `tanh` | tanh(x) |
    | `mish` | x tanh(softplus(x)), softplus(x) = log(1 + exp(x)) |
    | `hardswish` | x min(max(x + 3, 0), 6) / 6 |
    | `gelu_10` | the erf GELU clipped to [-10, 10] |
    | `laplace` | (1 + erf((x - 0.707107) / (0.282095 sqrt(2)))) / 2 |
    | `sqrtsoftplus` | sqrt(softplus(x)), softplus(x) = x past 20 (PyTorch's threshold) |

    SiLU and GELU are `braid.silu` and `braid.gelu`.

    ```mlir
    %y = braid.activation relu %x : tensor<1x8x3072xf32>
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$input, Braid_ActivationKind:$kind);
  let results = (outs Braid_FloatTensor:$result);
  let assemblyFormat = "$kind $input attr-dict `:` type($result)";
}

def Braid_EmbeddingOp : Braid_Op<"embedding", [Pure,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Table lookup, optionally over a vocabulary shard";
  let description = [{
    Gathers rows of `table` `[V, H]` at integer `ids` of any shape; the
    result is `ids.shape + [H]`. With `vocab_group = @g` the table is this
    rank's vocabulary shard `[r*V, (r+1)*V)` of group `@g` (Megatron's
    vocabulary-parallel embedding): ids outside the shard give zero rows,
    and an `all_reduce sum` over `@g` completes the lookup.

    ```mlir
    %e = braid.embedding %ids, %tab {vocab_group = @tp} : (tensor<2x16xi32>, tensor<8000x512xbf16>) -> tensor<2x16x512xbf16>
    ```
  }];
  let arguments = (ins Braid_IntTensor:$ids, Braid_FloatTensor:$table,
                       OptionalAttr<FlatSymbolRefAttr>:$vocab_group);
  let results = (outs Braid_FloatTensor:$result);
  let assemblyFormat = "$ids `,` $table attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Braid_SoftmaxOp : Braid_Op<"softmax", [Pure, SameOperandsAndResultType]> {
  let summary = "Softmax along one dimension";
  let description = [{
    ```mlir
    %p = braid.softmax %x dim 1 : tensor<4x32xf32>
    ```
  }];
  let arguments = (ins Braid_FloatTensor:$input, I64Attr:$dim);
  let results = (outs Braid_FloatTensor:$result);
  let assemblyFormat = "$input `dim` $dim attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Braid_SliceOp : Braid_Op<"slice", [Pure]> {
  let summary = "Static, unit-stride slice";
  let description = [{
    Takes `sizes` elements from `offsets` in every dimension.

    ```mlir
    %q = braid.slice %qkv offsets [0, 0, 0] sizes [1, 8, 256] : tensor<1x8x768xf32> -> tensor<1x8x256xf32>
    ```
  }];
  let arguments = (ins Braid_Tensor:$input, DenseI64ArrayAttr:$offsets,
                       DenseI64ArrayAttr:$sizes);
  let results = (outs Braid_Tensor:$result);
  let assemblyFormat = [{
    $input `offsets` $offsets `sizes` $sizes attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Braid_ConcatOp : Braid_Op<"concat", [Pure]> {
  let summary = "Concatenation along one dimension";
  let description = [{
    ```mlir
    %c = braid.concat %a, %b dim 1 : (tensor<4x8xf32>, tensor<4x24xf32>) -> tensor<4x32xf32>
    ```
  }];
  let arguments = (ins Variadic<Braid_Tensor>:$inputs, I64Attr:$dim);
  let results = (outs Braid_Tensor:$result);
  let assemblyFormat = "$inputs `dim` $dim attr-dict `:` functional-type($inputs, results)";
  let hasVerifier = 1;
}

def Braid_ReshapeOp : Braid_Op<"reshape", [Pure]> {
  let summary = "Reshape preserving the element count and order";
  let description = [{
    ```mlir
    %r = braid.reshape %x : tensor<2x16x512xbf16> -> tensor<2x16x8x64xbf16>
    ```
    Folds: reshape to the operand's own type is the operand;
    `reshape(reshape(x))` becomes one reshape of `x`.
  }];
  let arguments = (ins Braid_Tensor:$input);
  let results = (outs Braid_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

// Collectives read and write the communication resource: they are issued
// in program order on every rank and must never be merged or reordered by
// generic transformations.
def Braid_CommEffects : MemoryEffects<[MemRead<Braid_CommResource>,
                                       MemWrite<Braid_CommResource>]>;

class Braid_CollectiveKindDecl<string kind> {
  code decl = "static constexpr ::mlir::braid::CollectiveKind kCollectiveKind = "
              "::mlir::braid::CollectiveKind::" # kind # ";";
}

// A collective over a tensor, in its synchronous form (`Op`) and as the
// start of its asynchronous form (`StartOp`). Both share arguments,
// assembly and the shape rules (checked once in BraidOps.cpp).
multiclass Braid_TensorCollective<string mn, dag extraArgs, string fmt,
                                  string summaryText, string descr> {
  def Op : Braid_Op<mn, [DeclareOpInterfaceMethods<SymbolUserOpInterface>,
                         Braid_CollectiveOpInterface, Braid_CommEffects]> {
    let summary = summaryText;
    let description = descr;
    let arguments = !con((ins Braid_Tensor:$input, FlatSymbolRefAttr:$group), extraArgs);
    let results = (outs Braid_Tensor:$result);
    let assemblyFormat = fmt # " attr-dict `:` type($input) `->` type($result)";
    let extraClassDeclaration = Braid_CollectiveKindDecl<mn>.decl;
  }
  def StartOp : Braid_Op<mn # "_start", [Braid_AsyncStart,
      DeclareOpInterfaceMethods<SymbolUserOpInterface>,
      Braid_CollectiveOpInterface, Braid_CommEffects]> {
    let summary = "Starts an asynchronous `braid." # mn # "`";
    let description = "Same operands, attributes and shape rules as `braid." # mn #
        "`; returns a handle whose payload is the result type. Exactly one "
        "`braid.wait` consumes the handle and yields the result.";
    let arguments = !con((ins Braid_Tensor:$input, FlatSymbolRefAttr:$group), extraArgs);
    let results = (outs Braid_HandleType:$handle);
    let assemblyFormat = fmt # " attr-dict `:` type($input) `->` qualified(type($handle))";
    let extraClassDeclaration = Braid_CollectiveKindDecl<mn>.decl;
  }
}

defm Braid_AllReduce : Braid_TensorCollective<"all_reduce",
    (ins Braid_ReduceKind:$kind), "$kind $input `on` $group",
    "Reduce across the group; every rank gets the full result", [{
    Every rank contributes a tensor of the same type and receives the
    elementwise reduction (`sum`, `max`, `min`, `prod`) of all of them.

    ```
    rank0: [a0 b0]   rank1: [a1 b1]   ->   both: [a0+a1 b0+b1]
    ```
    ```mlir
    %y = braid.all_reduce sum %x on @tp : tensor<2x16x512xbf16> -> tensor<2x16x512xbf16>
    ```
  }]>;

defm Braid_AllGather : Braid_TensorCollective<"all_gather",
    (ins I64Attr:$dim), "$input `on` $group `dim` $dim",
    "Concatenate every rank's tensor along a dimension", [{
    The result is the concatenation, in rank order, of every rank's
    operand along `dim`: result size along `dim` = group size x operand size.

    ```
    rank0: [a]   rank1: [b]   ->   both: [a b]
    ```
    ```mlir
    %y = braid.all_gather %x on @tp dim 2 : tensor<2x16x2000xbf16> -> tensor<2x16x8000xbf16>
    ```
  }]>;

defm Braid_ReduceScatter : Braid_TensorCollective<"reduce_scatter",
    (ins Braid_ReduceKind:$kind, I64Attr:$dim), "$kind $input `on` $group `dim` $dim",
    "Reduce across the group and give each rank one slice", [{
    Reduces every rank's operand elementwise, then rank `r` keeps slice
    `r` of `n` equal slices along `dim` (which must divide by the group size).

    ```
    rank0: [a0 b0]   rank1: [a1 b1]   ->   rank0: [a0+a1]   rank1: [b0+b1]
    ```
    ```mlir
    %y = braid.reduce_scatter sum %x on @tp dim 1 : tensor<2x16x512xbf16> -> tensor<2x4x512xbf16>
    ```
  }]>;

defm Braid_AllToAll : Braid_TensorCollective<"all_to_all",
    (ins I64Attr:$split_dim, I64Attr:$concat_dim),
    "$input `on` $group `split` $split_dim `concat` $concat_dim",
    "Exchange slices: split along one dim, concatenate along another", [{
    Each rank splits its operand into `n` slices along `split_dim`, sends
    slice `j` to rank `j`, and concatenates what it receives (in rank order)
    along `concat_dim` (Ulysses sequence parallelism for attention).

    ```
    rank0: [a0 a1]   rank1: [b0 b1]   ->   rank0: [a0 b0]   rank1: [a1 b1]
    ```
    ```mlir
    %y = braid.all_to_all %x on @tp split 2 concat 1 : tensor<1x4x8x64xbf16> -> tensor<1x16x2x64xbf16>
    ```
  }]>;

defm Braid_Broadcast : Braid_TensorCollective<"broadcast",
    (ins I64Attr:$root), "$input `on` $group `root` $root",
    "Every rank receives the root rank's tensor", [{
    ```
    rank0 (root): [a]   rank1: [x]   ->   both: [a]
    ```
    ```mlir
    %y = braid.broadcast %ids on @tp root 0 : tensor<2x16xi32> -> tensor<2x16xi32>
    ```
  }]>;

def Braid_SendOp : Braid_Op<"send", [DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    Braid_CollectiveOpInterface, Braid_CommEffects]> {
  let extraClassDeclaration = Braid_CollectiveKindDecl<"send">.decl;
  let summary = "Send a tensor to one rank of the group";
  let description = [{
    Point-to-point send to rank `peer` of the group; pairs with a
    `braid.recv` from this rank on the peer.

    ```mlir
    braid.send %x to 1 on @pp : tensor<2x16x512xbf16>
    ```
  }];
  let arguments = (ins Braid_Tensor:$input, I64Attr:$peer, FlatSymbolRefAttr:$group);
  let assemblyFormat = "$input `to` $peer `on` $group attr-dict `:` type($input)";
}

def Braid_SendStartOp : Braid_Op<"send_start", [Braid_AsyncStart,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    Braid_CollectiveOpInterface, Braid_CommEffects]> {
  let extraClassDeclaration = Braid_CollectiveKindDecl<"send">.decl;
  let summary = "Starts an asynchronous `braid.send`";
  let description = [{
    Returns `!braid.handle<none>`; the matching `braid.wait` has no result.

    ```mlir
    %h = braid.send_start %x to 1 on @pp : tensor<2x16x512xbf16> -> !braid.handle<none>
    braid.wait %h : !braid.handle<none>
    ```
  }];
  let arguments = (ins Braid_Tensor:$input, I64Attr:$peer, FlatSymbolRefAttr:$group);
  let results = (outs Braid_HandleType:$handle);
  let assemblyFormat = "$input `to` $peer `on` $group attr-dict `:` type($input) `->` qualified(type($handle))";
}

def Braid_RecvOp : Braid_Op<"recv", [DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    Braid_CollectiveOpInterface, Braid_CommEffects]> {
  let extraClassDeclaration = Braid_CollectiveKindDecl<"recv">.decl;
  let summary = "Receive a tensor from one rank of the group";
  let description = [{
    ```mlir
    %x = braid.recv from 0 on @pp : tensor<2x16x512xbf16>
    ```
  }];
  let arguments = (ins I64Attr:$peer, FlatSymbolRefAttr:$group);
  let results = (outs Braid_Tensor:$result);
  let assemblyFormat = "`from` $peer `on` $group attr-dict `:` type($result)";
}

def Braid_RecvStartOp : Braid_Op<"recv_start", [Braid_AsyncStart,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    Braid_CollectiveOpInterface, Braid_CommEffects]> {
  let extraClassDeclaration = Braid_CollectiveKindDecl<"recv">.decl;
  let summary = "Starts an asynchronous `braid.recv`";
  let description = [{
    ```mlir
    %h = braid.recv_start from 0 on @pp : !braid.handle<tensor<2x16x512xbf16>>
    %x = braid.wait %h : !braid.handle<tensor<2x16x512xbf16>> -> tensor<2x16x512xbf16>
    ```
  }];
  let arguments = (ins I64Attr:$peer, FlatSymbolRefAttr:$group);
  let results = (outs Braid_HandleType:$handle);
  let assemblyFormat = "`from` $peer `on` $group attr-dict `:` qualified(type($handle))";
}

def Braid_WaitOp : Braid_Op<"wait", [Braid_CommEffects]> {
  let summary = "Complete an asynchronous collective";
  let description = [{
    Waits for the collective started by the `*_start` op that produced
    `handle` and yields its result (nothing for `send_start`). Each handle
    is waited exactly once. In scheduled IR the wait's stream is the one
    that waits: ops after it on that stream see the collective complete
    (the exporter lowers a wait on another stream than its start to an
    event). Until its wait the collective may still be reading its input
    and writing its result.

    ```mlir
    %y = braid.wait %h : !braid.handle<tensor<8x64xbf16>> -> tensor<8x64xbf16>
    ```
  }];
  let arguments = (ins Braid_HandleType:$handle);
  let results = (outs Optional<Braid_Tensor>:$result);
  let assemblyFormat = "$handle attr-dict `:` qualified(type($handle)) (`->` type($result)^)?";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Cross-stream ordering
//===----------------------------------------------------------------------===//

def Braid_EventRecordOp : Braid_Op<"event_record", [
    MemoryEffects<[MemRead<Braid_StreamResource>, MemWrite<Braid_StreamResource>]>]> {
  let summary = "Marks the current point of this op's stream";
  let description = [{
    Yields an event that completes when every op issued before it on its
    stream (`braid.stream`) has completed. A `braid.event_wait` on another
    stream makes that stream wait for it: this is how scheduled IR orders
    work across streams (`cudaEventRecord`).

    ```mlir
    %y = braid.silu %x {braid.stream = 0 : i64} : tensor<4x64xf32>
    %e = braid.event_record {braid.stream = 0 : i64}
    braid.event_wait %e {braid.stream = 1 : i64}
    %h = braid.all_reduce_start sum %y on @tp {braid.stream = 1 : i64} : tensor<4x64xf32> -> !braid.handle<tensor<4x64xf32>>
    ```
  }];
  let results = (outs Braid_EventType:$event);
  let assemblyFormat = "attr-dict";
}

def Braid_EventWaitOp : Braid_Op<"event_wait", [
    MemoryEffects<[MemRead<Braid_StreamResource>, MemWrite<Braid_StreamResource>]>]> {
  let summary = "Makes this op's stream wait for an event";
  let description = [{
    Ops issued after it on its stream (`braid.stream`) start only once the
    event's stream has reached the `braid.event_record` that produced
    `event` (`cudaStreamWaitEvent`). Dominance guarantees the record comes
    first in block order.

    ```mlir
    braid.event_wait %e {braid.stream = 1 : i64}
    ```
  }];
  let arguments = (ins Braid_EventType:$event);
  let assemblyFormat = "$event attr-dict";
}

#endif // BRAID_OPS_TD
