//===- Passes.td - braid passes ----------------------------*- tablegen -*-===//
#ifndef BRAID_PASSES_TD
#define BRAID_PASSES_TD

include "mlir/Pass/PassBase.td"

def BraidSimplifyPass : Pass<"braid-simplify", "::mlir::ModuleOp"> {
  let summary = "Fold braid reshapes and no-op slices to a fixed point";
  let description = [{
    Applies the braid dialect's folders greedily: a reshape to its operand's
    own type and a slice covering its whole operand disappear, and chains of
    reshapes collapse into one. Importers emit such chains when they move
    between `[B, S, H*D]` and `[B, S, H, D]` layouts.

    Before:
    ```mlir
    %a = braid.reshape %x : tensor<2x16x512xbf16> -> tensor<32x512xbf16>
    %b = braid.reshape %a : tensor<32x512xbf16> -> tensor<2x16x8x64xbf16>
    ```
    After:
    ```mlir
    %b = braid.reshape %x : tensor<2x16x512xbf16> -> tensor<2x16x8x64xbf16>
    ```
    Ops left without uses and free of side effects are erased.
  }];
  let dependentDialects = ["::mlir::braid::BraidDialect"];
}

def BraidNarrowGathersPass : Pass<"braid-narrow-gathers", "::mlir::ModuleOp"> {
  let summary = "All_gathers read by slices gather only what the slices keep";
  let description = [{
    An `all_gather` along dim d concatenates every rank's piece. A slice of
    the result whose range along d lies inside one rank's piece needs only
    that range from each rank: every rank slices its own piece the same way,
    gathers the slices, and keeps the one from the rank that held the range.
    A slice that keeps all of dim d slices each piece along the other dims
    first. A slice of a slice of the gather (the slice that drops sequence
    parallelism's pad rows, then the last-token slice) counts as one.
    A gather is rewritten only when every reader is such a slice and the
    narrow gathers together move less than it did; otherwise it stays
    whole, since narrow gathers beside it would only add collectives. An
    empty piece and a group of one are left alone. A gather nothing reads
    is removed (braid-decompose leaves one per chunk but the last for the
    prefill's final hidden state).

    The elements are the same, moved rather than computed: the result is
    bit for bit the same. Under Megatron sequence parallelism the
    prefill's last-token slice then gathers one row per rank instead of the
    whole hidden state (64 MiB per step for Llama-3-70B at tp 8).

    Before:
    ```mlir
    %g = braid.all_gather %x on @tp dim 1 : tensor<1x512x8192xbf16> -> tensor<1x4096x8192xbf16>
    %l = braid.slice %g offsets [0, 4095, 0] sizes [1, 1, 8192] : tensor<1x4096x8192xbf16> -> tensor<1x1x8192xbf16>
    ```
    After:
    ```mlir
    %r = braid.slice %x offsets [0, 511, 0] sizes [1, 1, 8192] : tensor<1x512x8192xbf16> -> tensor<1x1x8192xbf16>
    %g = braid.all_gather %r on @tp dim 1 : tensor<1x1x8192xbf16> -> tensor<1x8x8192xbf16>
    %l = braid.slice %g offsets [0, 7, 0] sizes [1, 1, 8192] : tensor<1x8x8192xbf16> -> tensor<1x1x8192xbf16>
    ```
    Only synchronous `all_gather`s are rewritten (the pass runs before
    braid-schedule makes them asynchronous). It assumes every rank of the
    group runs the function, as braid-compile's plans do.
  }];
  let dependentDialects = ["::mlir::braid::BraidDialect"];
}

def BraidFuseComputePass : Pass<"braid-fuse-compute", "::mlir::ModuleOp"> {
  let summary = "Fuse compute ops into fewer, larger ones (SwiGLU, add + RMSNorm)";
  let description = [{
    Every op of a step is a kernel launch and a round trip of its result
    through memory. This pass replaces patterns the runtimes have one kernel
    for; today:

    - `braid.mul(braid.silu(%g), %u)` (either operand order) becomes
      `braid.swiglu %g, %u`: LLaMA's, Mistral's and Qwen2's MLP. One launch
      instead of two, and the silu result is never written.
    - `braid.rms_norm(braid.add(%x, %r), %w)` becomes
      `braid.add_rms_norm %x, %r, %w`, whose first result is the sum (the
      residual stream, read on by the next layer) and second the norm: one
      launch that reads the row once. The sum's other readers read the
      fused op's sum; it takes the norm's place, or the add's when another
      reader of the sum comes first (and the weight is defined before the
      add; otherwise the pair stays).
    - Matmuls that read one input against different weights (Q, K and V;
      gate and up) become one matmul against a `braid.parameter_pack` of
      the weights, followed by one `braid.slice` per original result. Only
      where every slice is a view (the result's rows are one row: decode at
      batch 1), so the split copies nothing: elsewhere the slices would be
      strided copies that cost more than the launches saved. The weights
      keep their names, so checkpoints and synthetic weights load as
      before. Requires `transpose_b` weights that are `braid.parameter`
      results of one element type with the input.
    - A matmul whose only reader adds an `[N]` bias, and that add's only
      reader a tanh GELU (GPT-2's c_fc; c_attn and Qwen2's q/k/v without
      the GELU) or a residual add (GPT-2's c_proj at tp 1), becomes one
      matmul with a `bias` and `gelu` or `residual` epilogue, which the
      CUDA executor runs inside cuBLASLt (BIAS / GELU_BIAS, C with beta 1;
      the executor has no fusion of its own). An erf GELU stays its own
      op; a residual add an rms_norm reads becomes add_rms_norm instead
      (the epilogues are fused last).

    Before:
    ```mlir
    %s = braid.silu %g : tensor<1x8x128xf32>
    %y = braid.mul %s, %u : (tensor<1x8x128xf32>, tensor<1x8x128xf32>) -> tensor<1x8x128xf32>
    ```
    After:
    ```mlir
    %y = braid.swiglu %g, %u : tensor<1x8x128xf32>
    ```

    Refused (left as they are): a silu result read by anything else (or
    returned), a mul that broadcasts or whose operand and result types
    differ, and ops that carry schedule attributes (a stream, events, a
    buffer: the pass runs before scheduling and memory planning), and an
    add that broadcasts. swiglu is bit for bit the pair in f32 and rounds
    once where the pair rounds twice in bf16 and f16; add_rms_norm is the
    pair exactly in every dtype (the norm reads the rounded sum).
    test/run/fuse-compute.test checks both against the unfused plan and
    against transformers.
  }];
  let options = [
    Option<"matmuls", "matmuls", "bool", /*default=*/"true",
           "Fuse matmuls that share their input (Q/K/V, gate/up)">,
    Option<"epilogues", "epilogues", "bool", /*default=*/"true",
           "Fuse a bias add and a tanh GELU into the matmul before them">,
  ];
}

def BraidFuseCollectivesPass
    : Pass<"braid-fuse-collectives", "::mlir::ModuleOp"> {
  let summary = "Fold sums of all_reduces, and gathers of reduce-scatters, into one all_reduce";
  let description = [{
    The sum of two all_reduce sums over the same group is the all_reduce of
    the sum: `all_reduce(a) + all_reduce(b) = all_reduce(a + b)`. Parallel
    attention and MLP blocks (GPT-NeoX's `use_parallel_residual`, GPT-J)
    reduce both halves of a layer and add them; after the fold each layer
    moves half the bytes in one collective instead of two.

    Replicated terms added to a reduction in between (the biases of
    row-parallel layers, added after their all_reduce) are reassociated out
    of the way: `(all_reduce(a) + p) + (all_reduce(b) + q)` becomes
    `all_reduce(a + b) + (p + q)`.

    Before:
    ```mlir
    %ra = braid.all_reduce sum %a on @tp : tensor<1x8x64xf32> -> tensor<1x8x64xf32>
    %xa = braid.add %ra, %p : (tensor<1x8x64xf32>, tensor<64xf32>) -> tensor<1x8x64xf32>
    %rb = braid.all_reduce sum %b on @tp : tensor<1x8x64xf32> -> tensor<1x8x64xf32>
    %xb = braid.add %rb, %q : (tensor<1x8x64xf32>, tensor<64xf32>) -> tensor<1x8x64xf32>
    %s = braid.add %xa, %xb : (tensor<1x8x64xf32>, tensor<1x8x64xf32>) -> tensor<1x8x64xf32>
    ```
    After:
    ```mlir
    %ab = braid.add %a, %b : (tensor<1x8x64xf32>, tensor<1x8x64xf32>) -> tensor<1x8x64xf32>
    %r = braid.all_reduce sum %ab on @tp : tensor<1x8x64xf32> -> tensor<1x8x64xf32>
    %pq = braid.add %p, %q : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
    %s = braid.add %r, %pq : (tensor<1x8x64xf32>, tensor<64xf32>) -> tensor<1x8x64xf32>
    ```
    `all_gather(reduce_scatter(x, sum, dim d), dim d)` over one group, with
    nothing else reading the shard, becomes `all_reduce(x)`: one collective
    instead of two.

    Only folds when both reductions are synchronous `sum`s over the same
    group with the same type, each reduction (and each partial sum it
    feeds) has no other use, and both summands are defined before the
    outer add (so nothing is reordered). The sum is reassociated, so the
    result differs from the unfused one by rounding: off by default
    (`braid-compile --fuse-collectives`), checked by differential tests
    against transformers (test/run/fuse-collectives.test).

    With `combine-bytes=N` (default 0: off), runs of independent
    synchronous all_reduces of one group, kind and element type, at most N
    bytes together, become one all_reduce of their flattened concatenation
    (one launch and one latency instead of several, NCCL's own bucketing
    done in the compiler), placed at the last of them and sliced back
    apart. Every element is reduced exactly as before. A run never spans
    another collective of the group (collectives of one group are never
    reordered) nor an op that reads one of its results (which is also what
    keeps a member from depending on another).

    ```mlir
    %ra = braid.all_reduce sum %a on @tp : tensor<4x8xf32> -> tensor<4x8xf32>
    %rb = braid.all_reduce sum %b on @tp : tensor<16xf32> -> tensor<16xf32>
    ```
    becomes, with `combine-bytes=192`:
    ```mlir
    %fa = braid.reshape %a : tensor<4x8xf32> -> tensor<32xf32>
    %c = braid.concat %fa, %b dim 0 : (tensor<32xf32>, tensor<16xf32>) -> tensor<48xf32>
    %r = braid.all_reduce sum %c on @tp : tensor<48xf32> -> tensor<48xf32>
    %sa = braid.slice %r offsets [0] sizes [32] : tensor<48xf32> -> tensor<32xf32>
    %ra = braid.reshape %sa : tensor<32xf32> -> tensor<4x8xf32>
    %rb = braid.slice %r offsets [32] sizes [16] : tensor<48xf32> -> tensor<16xf32>
    ```
  }];
  let options = [
    Option<"fold", "fold", "bool", "true",
           "fold sums of all_reduces and gathers of reduce-scatters (reassociates sums)">,
    Option<"combineBytes", "combine-bytes", "int64_t", "0",
           "pack independent all_reduces up to this many bytes together (0: never)">
  ];
  let dependentDialects = ["::mlir::braid::BraidDialect"];
  let statistics = [
    Statistic<"numFolded", "folded", "collective pairs folded into one">,
    Statistic<"numCombined", "combined", "all_reduces packed with others into one">
  ];
}

def BraidSequenceParallelPass
    : Pass<"braid-sequence-parallel", "::mlir::ModuleOp"> {
  let summary = "Run the residual stream and its norms on 1/tp of the tokens (Megatron sequence parallelism)";
  let description = [{
    In a tensor-parallel layer every rank holds the whole residual stream:
    the row-parallel matmul's `all_reduce` gives each rank all tokens, and
    the residual add and the next norm run on all of them, tp times over.
    Megatron-LM's sequence parallelism (Korthikanti et al., 2022) replaces
    the `all_reduce` by a `reduce_scatter` along the tokens, runs the
    token-wise ops on the rank's token shard, and `all_gather`s the tokens
    back right before the ops that need them all (the next column-parallel
    matmul, attention, the last-token slice before the LM head). A ring
    all_reduce is a reduce_scatter plus an all_gather, so the bytes on the
    wire are the same; the norm-region activations and their work shrink
    by tp.

    The region: every synchronous `all_reduce sum` over one group whose
    result is `[B, S, ...]` with S (or B) divisible by the group size, closed under
    token-wise ops whose other operands are region values of the same type
    or unsharded parameters that broadcast over the tokens: `add`, `mul`,
    `rms_norm`, `layer_norm`, `silu`, `gelu`. An `add` or `mul` may also
    read a whole tensor every rank holds alike (a step input, or values
    computed from inputs and unsharded parameters only, such as GPT-2's
    position embeddings): the rank takes its rows of it with an
    `all_to_all` that splits and concatenates along the shard dim (rank r
    receives r's piece of every rank's identical copy) and a `slice`. Any other reader of a region
    value (a matmul, a slice, the function's results) reads an
    `all_gather` of it, inserted before its first such reader.

    Before (one layer's attention output and the next norm):
    ```mlir
    %r = braid.all_reduce sum %o on @tp : tensor<1x8x64xf32> -> tensor<1x8x64xf32>
    %h = braid.add %x, %r : (tensor<1x8x64xf32>, tensor<1x8x64xf32>) -> tensor<1x8x64xf32>
    %n = braid.rms_norm %h, %w {epsilon = 1.0e-05 : f64} : (tensor<1x8x64xf32>, tensor<64xf32>) -> tensor<1x8x64xf32>
    %u = braid.matmul %n, %up {transpose_b} : (tensor<1x8x64xf32>, tensor<64x64xf32>) -> tensor<1x8x64xf32>
    ```
    After, at tp 2 (`%x` is itself a region value, now `%xs`):
    ```mlir
    %rs = braid.reduce_scatter sum %o on @tp dim 1 : tensor<1x8x64xf32> -> tensor<1x4x64xf32>
    %hs = braid.add %xs, %rs : (tensor<1x4x64xf32>, tensor<1x4x64xf32>) -> tensor<1x4x64xf32>
    %ns = braid.rms_norm %hs, %w {epsilon = 1.0e-05 : f64} : (tensor<1x4x64xf32>, tensor<64xf32>) -> tensor<1x4x64xf32>
    %n = braid.all_gather %ns on @tp dim 1 : tensor<1x4x64xf32> -> tensor<1x8x64xf32>
    %u = braid.matmul %n, %up {transpose_b} : (tensor<1x8x64xf32>, tensor<64x64xf32>) -> tensor<1x8x64xf32>
    ```
    On the CPU interpreter the rewrite is exact: a reduce_scatter reduces
    in the same rank order as an all_reduce, and the token-wise ops compute
    each token as before.

    When the tokens of a step do not divide by the group size but the batch
    does (decode at batch >= tp), the shards cut the batch (dim 0) instead.

    `mode=ulysses` (DeepSpeed-Ulysses, Jacobs et al., 2023) goes further
    in functions whose tokens divide: after the Megatron rewrite, each
    attention runs on all tokens of a head shard. q, k and v are projected
    on the rank's token shard with whole weights, and an `all_to_all`
    (split heads, concat tokens) turns `[B, S/n, h, D]` into
    `[B, S, h/n, D]`, the very tensor the head-sharded projection made (so
    RoPE, q/k norms, the KV cache and attention are unchanged); the output
    goes back by the inverse `all_to_all` and through a whole o_proj, which
    leaves no reduction. The MLP stays Megatron. A plan declares each
    parameter once, so the functions Ulysses cannot take (a one-token
    decode, where a pad row would reach attention) read the same whole
    weights in plain TP form: every rank projects all heads of the
    replicated hidden state, takes its own through an `all_to_all` of
    identical pieces, and gathers the heads back before o_proj. Legal only
    with separate q/k/v projections whose KV heads the group divides;
    anything else is an error naming the reason. Ulysses is asked for by
    name and is applied wherever legal, without asking the cost model.

    Applied per function, only where it pays: the rewritten function is
    priced against the original on `target`'s timeline (braid-estimate's
    model) and kept when its step is faster. That prices both unscheduled;
    scheduled, with token chunks, the answer can differ either way (the
    reduce_scatter and all_gather hide differently from an all_reduce).
    With `variants` (the default pipeline when it schedules) the pass does
    not decide for a function of more than one token per sequence: it adds
    the rewritten function as a private copy, `@<name>.sp` with
    `braid.variant_of = "<name>"`, and braid-decompose prices both after
    chunking and scheduling and keeps the faster under the original name.
    One-token steps (decode) are still priced here. `force` applies it
    wherever it is legal (tests; decode-sized steps).

    Tokens that neither they nor the batch divide by the group size (a
    prompt of 4095 tokens at tp 8, one sequence's decode step) are padded
    up to the next multiple before each reduce_scatter with the input's
    own first rows (`braid.concat` of it and a `braid.slice` of it, or of
    several copies when the pad is longer than the input), so the pad rows
    are copies of real tokens and as finite as they are; they are
    dropped by a `braid.slice` right after each all_gather, so they never
    reach attention, the KV cache or the outputs. `pad=false` leaves such
    functions alone instead. `report` prints, per function, what was
    rewritten or why not, with the two step times.
  }];
  let options = [
    Option<"mode", "mode", "std::string", "\"megatron\"",
           "megatron, ulysses (megatron plus all_to_all around attention), or off">,
    Option<"force", "force", "bool", "false",
           "rewrite wherever legal, without asking the cost model">,
    Option<"pad", "pad", "bool", "true",
           "pad token counts the group does not divide (off: leave them alone)">,
    Option<"target", "target", "std::string", "\"h100-sxm-x8\"",
           "hardware target whose cost model decides (a preset name or a JSON file)">,
    Option<"variants", "variants", "bool", "false",
           "keep each function as it is and add its rewritten form as a "
           "private variant for braid-decompose to price scheduled (megatron, "
           "without force)">,
    Option<"report", "report", "bool", "false",
           "print what was rewritten, and why not, to stderr">
  ];
  let dependentDialects = ["::mlir::braid::BraidDialect"];
  let statistics = [
    Statistic<"numReduceScatters", "reduce-scatters",
              "all_reduces rewritten into reduce_scatter + all_gather">,
    Statistic<"numUlysses", "ulysses-attentions",
              "attentions rewritten into Ulysses form">
  ];
}

def BraidPlanMemoryPass : Pass<"braid-plan-memory", "::mlir::ModuleOp"> {
  let summary = "Place every tensor in a per-rank arena by liveness";
  let description = [{
    Gives every tensor that the runtime does not own a buffer (offset, size)
    in its function's arena, reusing memory once a buffer is dead. Parameters
    and `braid.state` values (and KV caches an attention updates in place)
    are runtime-owned and get none. An async collective's input stays live
    until its wait, and its payload is live from the start.

    Placement is greedy by size: the largest buffer first, each at the
    lowest offset that overlaps no buffer whose lifetime conflicts. Two
    lifetimes do not conflict when every use of one happens-before the
    definition of the other; with one stream that is program order.

    Each function gets `braid.arena_size` and `braid.arena_lower_bound`
    (the most bytes live at once: no placement can use less), op results
    `braid.buffers = array<i64: offset, size, ...>` (one pair per result,
    `-1, 0` for results outside the arena) and inputs `braid.buffer`.

    ```mlir
    %1 = braid.silu %0 : tensor<4x64xf32>
    %2 = braid.silu %1 : tensor<4x64xf32>
    %3 = braid.silu %2 : tensor<4x64xf32>
    ```
    After (256-byte alignment; %3 reuses %1's buffer):
    ```mlir
    %1 = braid.silu %0 {braid.buffers = array<i64: 1024, 1024>} : tensor<4x64xf32>
    %2 = braid.silu %1 {braid.buffers = array<i64: 2048, 1024>} : tensor<4x64xf32>
    %3 = braid.silu %2 {braid.buffers = array<i64: 1024, 1024>} : tensor<4x64xf32>
    ```
  }];
  let options = [
    Option<"alignment", "alignment", "int64_t", "256",
           "Byte alignment of every buffer (a power of two)">,
    Option<"reuse", "reuse", "bool", "true",
           "Share memory between buffers whose lifetimes do not overlap">,
    Option<"report", "report", "bool", "false",
           "Emit a remark per function with arena size, lower bound and "
           "the size without reuse">,
  ];
  let dependentDialects = ["::mlir::braid::BraidDialect"];
}

def BraidEstimatePass : Pass<"braid-estimate", "::mlir::ModuleOp"> {
  let summary = "Cost-model timeline of every entry function: step time, "
                "exposed communication, overlap";
  let description = [{
    Prices every op on a hardware target (`targets/*.json`, or a path) and
    replays each public function as the ranks would run it: serially for
    unscheduled IR (everything on stream 0, where an async start overlaps
    nothing), per stream for scheduled IR (`braid.stream` on ops), honoring
    data dependencies, async start/wait pairs and `braid.event_wait` on an
    `braid.event_record`. The host launches kernels at the
    target's eager or CUDA Graph launch cost.

    Reports per function: step time T, compute time C, communication time
    M, exposed communication (a collective running while no compute does),
    T_serial (the same ops on one stream), overlap efficiency
    (T_serial - T) / min(C, M), the ideal bound max(C, M), launch gaps and
    the critical path, and time per op kind. Text by default, JSON with
    `format=json`; `trace=file.json` writes a Chrome trace (one track per
    rank x stream). The IR is not changed.

    ```sh
    braid-import models/llama-3-70b/config.json --tp 8 --seq 4096 |
      braid-opt --braid-estimate="target=h100-sxm-x8 trace=70b.json" -o /dev/null
    ```
  }];
  let options = [
    Option<"target", "target", "std::string", "\"h100-sxm-x8\"",
           "Target preset name (targets/<name>.json) or a target .json path">,
    Option<"launch", "launch", "std::string", "\"graph\"",
           "Kernel launch model: graph (CUDA Graph replay) or eager">,
    Option<"format", "format", "std::string", "\"text\"",
           "Report format: text or json">,
    Option<"report", "report", "std::string", "\"-\"",
           "Where the report goes ('-': stdout)">,
    Option<"trace", "trace", "std::string", "\"\"",
           "Write a Chrome trace event file (Perfetto, chrome://tracing)">,
    Option<"calibration", "calibration", "std::string", "\"\"",
           "CSV of measured per-op times (op,shape,us) that replace the "
           "model where they match">,
  ];
  let dependentDialects = ["::mlir::braid::BraidDialect"];
}

def BraidInsertEventsPass : Pass<"braid-insert-events", "::mlir::ModuleOp"> {
  let summary = "Order every cross-stream dependency with the fewest event "
                "record/wait pairs";
  let description = [{
    For a scheduled function (`braid.stream` on its ops), finds every pair
    of ops on different streams that must be ordered and is not yet: a value
    produced on one stream and used on another, bytes reused across streams
    once memory is planned, a state slot updated in place, a collective
    result read after its `braid.wait` on another stream, and collectives of
    different communicators (which may deadlock when they run concurrently,
    unless `concurrent-communicators`). For each op it keeps only the
    latest predecessor per stream, drops any that another kept predecessor
    already orders (transitive reduction), and orders the rest with a
    `braid.event_record` right after the predecessor and a
    `braid.event_wait` right before the op. Pairs that stream order or an
    earlier event already order get nothing. Functions without streams are
    left alone.

    Before:
    ```mlir
    %a = braid.silu %x {braid.stream = 0 : i64} : tensor<4xf32>
    %b = braid.gelu none %a {braid.stream = 1 : i64} : tensor<4xf32>
    ```
    After:
    ```mlir
    %a = braid.silu %x {braid.stream = 0 : i64} : tensor<4xf32>
    %e = braid.event_record {braid.stream = 0 : i64}
    braid.event_wait %e {braid.stream = 1 : i64}
    %b = braid.gelu none %a {braid.stream = 1 : i64} : tensor<4xf32>
    ```
    A dependency no event can satisfy (an op touching the bytes of a
    collective that is still in flight, or a collective issued while one of
    another communicator is in flight) is an error naming both ops.

    With `replace`, the function's events are erased first and inserted
    again. The default pipeline does this after `braid-plan-memory`: a
    reshape or slice that becomes a view no longer writes bytes of its
    own, so a wait for it is a wait for its producer, which an earlier
    event may already order (Ulysses: the k and v exchanges waited for
    their reshapes after the q exchange had waited for the projection);
    and the reuse of bytes across streams is ordered from the plan itself.
  }];
  let options = [
    Option<"concurrentCommunicators", "concurrent-communicators", "bool",
           "false",
           "The target runs collectives of different communicators "
           "concurrently without deadlock; do not order them (analysis "
           "only: plans always get the ordered rule, see "
           "braid-verify-schedule)">,
    Option<"replace", "replace", "bool", "false",
           "Erase the function's events and insert them again (after "
           "braid-plan-memory: views leave waits for their producers)">,
  ];
  let dependentDialects = ["::mlir::braid::BraidDialect"];
}

def BraidDecomposePass : Pass<"braid-decompose", "::mlir::ModuleOp"> {
  let summary = "Cut a prefill's tokens into chunks whose ops interleave, so "
                "one chunk's collectives overlap the next chunk's compute";
  let description = [{
    In a plain tensor-parallel layer every all_reduce feeds the very next
    op: nothing can hide it. Cutting the tokens (dim 1 of `[batch, tokens,
    ...]`) into k chunks creates the independence (chunked prefill within
    one step, the ISO and TokenWeave idea): the function's token inputs are
    sliced, every op reading token values is issued once per chunk, the
    k copies of each op side by side, so that after `braid-schedule` chunk
    i's all_reduce flies while chunk i+1's matmuls run. Causal attention
    over the KV cache threads the chunks: chunk i writes its keys at its
    first position and reads the rows of the chunks before it, so every
    token sees exactly the keys it saw before. A slice of tokens inside one
    chunk (the last token before the LM head) is taken from that chunk;
    token outputs are the chunks concatenated, caches the last chunk's. An
    op the chunks cannot pass through, once a collective was cut, joins
    them: it runs once on their concatenation, and so does what follows
    it (a bucketed prefill's last-token row gather). A reduce_scatter
    along the tokens, or an all_to_all splitting them (Ulysses), splits
    each chunk over the group: rank r holds piece r of each chunk, so a
    split value flows only through token-wise ops until an all_gather
    along the tokens, or an all_to_all concatenating them, makes the
    chunks whole again.

    `chunks` lists the counts to consider (default `1,2,4`; one count forces
    it). The chunks' ops are ordered one of two ways (`order`): side by
    side, the k copies of each op together, or skewed, a software pipeline
    in which chunk c runs one collective behind chunk c-1. Collectives keep
    their program order on their stream, so side by side the chunks'
    copies of one collective queue together; with sequence parallelism
    chunk 0's all_gather then waits for every chunk's reduce_scatter, the
    last of which waits for the last chunk's matmul. Skewed, one chunk's
    collectives fly while the others compute, at the cost of filling and
    draining the pipeline once per step. Each count that divides every
    token value's dim 1 and whose ops are all token-wise is priced in both
    orders (unless `order` forces one): a copy of the function is cut,
    scheduled (`braid-schedule`, `braid-assign-streams`,
    `braid-insert-events`) and simulated on `target`; the fastest step
    wins, ties to fewer chunks and then side by side, so a decode step (one
    token) and anything the model says would be slower stay as they are.
    The function gets `braid.token_chunks = k`.

    A function may have variants: private functions with
    `braid.variant_of = "<its name>"` (braid-sequence-parallel's
    `variants=true` adds the sequence-parallel form). Every form is priced
    the same way; the fastest takes the function's place and name, and the
    other forms are erased. Candidates are priced on their own copies, in
    parallel where the MLIR context has threads. Refused, with the reason in the `report` remark: before
    any collective was cut (after one, they join the chunks), an
    attention without a KV cache, non-causal, or not positioned at the
    first token of the `positions` input (consecutive positions by
    contract), a softmax or concat along the tokens, a slice of tokens
    across chunks, a reshape that moves the tokens, an op reading a token
    value and a whole activation, an add or mul broadcasting a token value
    of lower rank, a matmul whose operands hold the tokens other than in
    a's batch dims, an embedding whose table is a token value, a rope
    whose positions are not token values; a split value returned,
    sliced along the tokens, read by an attention or beside a whole one,
    or combined by another collective; an all_gather of tokens not split;
    an all_to_all concatenating tokens from every rank (splitting the
    tokens too, or another dim of whole tokens) read other than by a slice
    of its first piece (GPT-2's positions under sequence parallelism and
    Ulysses' whole-weight heads are cut per chunk that way); broadcasts
    and point-to-point ops. Every
    chunked op computes what the whole op did for those tokens, so the
    result is the same bit for bit.
  }];
  let options = [
    Option<"chunks", "chunks", "std::string", "\"1,2,4\"",
           "Chunk counts to consider, comma-separated (one count forces it)">,
    Option<"order", "order", "std::string", "\"auto\"",
           "How the chunks' ops are ordered: side-by-side, skewed (a "
           "software pipeline, chunk c one collective behind chunk c-1) or "
           "auto (the cost model prices both)">,
    Option<"target", "target", "std::string", "\"h100-sxm-x8\"",
           "Hardware target (preset name or .json) the counts are priced on">,
    Option<"report", "report", "bool", /*default=*/"false",
           "Remark per function: the count chosen, the estimates, refusals">,
  ];
}

def BraidSchedulePass : Pass<"braid-schedule", "::mlir::ModuleOp"> {
  let summary = "Latency-hiding list scheduling: collectives as start/wait "
                "pairs where compute can run while they fly";
  let description = [{
    In the spirit of XLA's latency-hiding scheduler. For each unscheduled
    function, every synchronous tensor collective becomes a `*_start` and a
    `braid.wait`, and the function is list-scheduled over its dependences:
    a ready start is issued first (as early as its operand allows), then
    ready compute in its original order, and a wait only when nothing else
    is ready (as late as possible), the earliest started first. So compute
    that does not depend on a collective (GPT-NeoX's MLP beside its
    attention's all_reduce) moves between that collective's start and its
    wait. Collectives keep their order: a start never passes another
    collective.

    A pair that hides no more compute (by the cost model on `target`, each
    kernel with its launch gap) between its start and its wait than
    `min-hidden-us` stays synchronous: the default is two graph-node
    launches of the target, the price of the two cross-stream dependencies
    the pair adds. In a plain tensor-parallel layer every all_reduce feeds
    the next op, and the function is left as it was. While
    the schedule holds more than `max-extra-live-bytes` more bytes live at
    its peak than the original order (an async collective's operand lives
    until its wait, its payload from its start), the collective started
    last goes back to synchronous; the default bound is a tenth of the
    target GPU's memory. Functions already scheduled (streams, async
    collectives) are left alone. `braid-assign-streams` then puts the
    started collectives on a communication stream; on one stream a start
    overlaps nothing.

    Before:
    ```mlir
    %a = braid.all_reduce sum %x on @tp : tensor<8xf32> -> tensor<8xf32>
    %b = braid.silu %y : tensor<8xf32>
    %c = braid.add %a, %b : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
    ```
    After:
    ```mlir
    %h = braid.all_reduce_start sum %x on @tp : tensor<8xf32> -> !braid.handle<tensor<8xf32>>
    %b = braid.silu %y : tensor<8xf32>
    %a = braid.wait %h : !braid.handle<tensor<8xf32>> -> tensor<8xf32>
    %c = braid.add %a, %b : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
    ```
  }];
  let options = [
    Option<"target", "target", "std::string", "\"h100-sxm-x8\"",
           "Hardware target (preset name or .json) pricing the hidden compute">,
    Option<"maxExtraLiveBytes", "max-extra-live-bytes", "int64_t",
           /*default=*/"-1",
           "Most extra bytes the schedule may keep live at its peak (-1: a "
           "tenth of the target GPU's memory)">,
    Option<"minHiddenUs", "min-hidden-us", "double", /*default=*/"-1",
           "Least compute (us) a collective must hide to run async (-1: two "
           "graph launches of the target)">,
    Option<"report", "report", "bool", /*default=*/"false",
           "Remark per function: collectives made async, extra live bytes">,
  ];
}

def BraidAssignStreamsPass : Pass<"braid-assign-streams", "::mlir::ModuleOp"> {
  let summary = "Compute on stream 0, each group's collectives on a stream "
                "of their own, when a function has async collectives";
  let description = [{
    For each function with async collectives (`*_start`, after
    `braid-schedule`) and no streams yet: every collective of device group
    `g` (in declaration order) runs on stream `1 + g`, as a start there and
    a `braid.wait` on stream 0 (a synchronous collective becomes a start
    with its wait right after, so each group keeps one communicator and its
    collectives their order); everything else runs on stream 0. Run
    `braid-insert-events` next: it orders each start after the producer of
    its operand. Functions without async collectives stay unscheduled (one
    stream).
  }];
}

def BraidVerifySchedulePass : Pass<"braid-verify-schedule", "::mlir::ModuleOp"> {
  let summary = "Prove a scheduled function race-free and hang-free, or "
                "refuse it naming the unordered ops";
  let description = [{
    Happens-before is stream order plus `braid.event_wait` -> its
    `braid.event_record` and `braid.wait` -> its start, closed
    transitively (vector clocks; O(ops x streams)). The pass checks:

    - race freedom: every two accesses to the same bytes, at least one a
      write, are ordered. Bytes are the arena ranges `braid-plan-memory`
      assigned (so buffer reuse is checked), state slots (in-place KV
      cache updates and the copy-back at the end) and, before memory
      planning, each value's own storage. An async collective reads its
      input and writes its result at any time until its `braid.wait`: no
      op may touch those bytes in between, and afterwards only ops ordered
      after the wait;
    - hang freedom: every handle is waited exactly once (the dialect
      verifier), collectives of one communicator (group, stream) are issued
      in stream order, and a collective of another communicator begins only
      after the previous one has completed (its wait), unless
      `concurrent-communicators`: NCCL kernels of two communicators
      launched in different orders on different ranks can deadlock.

    Errors name both ops, their streams and the bytes. The IR is unchanged.
  }];
  let options = [
    Option<"concurrentCommunicators", "concurrent-communicators", "bool",
           "false",
           "The target runs collectives of different communicators "
           "concurrently without deadlock (analysis only: the plan loader, "
           "and so braid-to-plan, always orders them, since no runtime "
           "today guarantees that NCCL kernels of two communicators never "
           "deadlock)">,
  ];
  let dependentDialects = ["::mlir::braid::BraidDialect"];
}

#endif // BRAID_PASSES_TD
