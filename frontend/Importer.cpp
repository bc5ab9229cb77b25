//===- Importer.cpp - HF transformer config -> braid IR -------------------===//
//
// Megatron tensor parallelism for one rank:
//   - QKV and gate/up projections column-parallel (weights cut along the
//     output dim), attention runs on the rank's heads;
//   - o_proj and down_proj row-parallel (cut along the input dim), followed
//     by an all_reduce sum; biases of row-parallel layers are added after it;
//   - vocabulary-parallel embedding + all_reduce; LM head column-parallel
//     over the vocabulary + all_gather of the logits.
// KV heads fewer than ranks are replicated (vLLM): each rank holds one.
//
//===----------------------------------------------------------------------===//
#include "frontend/Importer.h"

#include "dialect/BraidOps.h"
#include "dialect/ShapeChecks.h"
#include "runtime/CheckedMath.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir;
using namespace mlir::braid;
using ::braid::Activation;
using ::braid::ImportOptions;
using ::braid::ModelConfig;
using ::braid::ModelFamily;

static llvm::Error importError(const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
}

namespace {

/// Derived per-rank sizes, validated once.
struct Layout {
  int64_t tp, heads, kvHeads, headDim;
  int64_t headsLocal, kvHeadsLocal, kvShards;
  int64_t interLocal;
  int64_t vocab, vocabPadded;
  int64_t batch, seq, maxSeq;
};

/// One tensor the importer builds: what it is and the named sizes whose
/// product is its element count.
struct TensorSizes {
  std::string tensor;
  SmallVector<std::pair<std::string, int64_t>> dims;
};

/// Refuses a config whose tensor would hold more elements than a braid
/// tensor can (2^40), naming the fields that multiply to it.
llvm::Error checkTensorElements(const TensorSizes &t) {
  std::optional<int64_t> n = 1;
  std::string factors;
  for (const auto &[name, size] : t.dims) {
    n = n ? ::braid::checkedMul(*n, size) : std::nullopt;
    factors +=
        (factors.empty() ? "" : " x ") + name + " " + std::to_string(size);
  }
  if (n && *n <= kMaxTensorElements)
    return llvm::Error::success();
  return importError(t.tensor + " [" + factors + "] has " +
                     (n ? std::to_string(*n) : "more than int64 can count") +
                     " elements; a braid tensor holds at most " +
                     std::to_string(kMaxTensorElements) +
                     " (2^40): lower one of these sizes");
}

/// A bucket list (`flag`): strictly increasing, each in [1, max].
llvm::Error checkIncreasing(StringRef flag, StringRef item,
                            ArrayRef<int64_t> list, int64_t max,
                            StringRef maxName) {
  for (size_t i = 0; i < list.size(); ++i) {
    if (list[i] < 1 || list[i] > max)
      return importError(flag + ": " + item + " " + llvm::Twine(list[i]) +
                         " must be in [1, " + maxName + " " +
                         llvm::Twine(max) + "]");
    if (i > 0 && list[i] <= list[i - 1])
      return importError(flag + " must be strictly increasing, got " +
                         llvm::Twine(list[i - 1]) + " then " +
                         llvm::Twine(list[i]));
  }
  return llvm::Error::success();
}

llvm::Expected<Layout> computeLayout(const ModelConfig &c,
                                     const ImportOptions &o) {
  Layout l;
  l.tp = o.tp;
  if (o.tp < 1 || o.batch < 1 || o.seq < 1)
    return importError("--tp, --batch and --seq must be >= 1");
  // Bounds on the options that multiply into memory (docs/frontend.md);
  // --seq and --max-seq are bounded by the model's positions below.
  if (o.tp > kMaxWorldSize)
    return importError("--tp " + llvm::Twine(o.tp) + " exceeds " +
                       llvm::Twine(kMaxWorldSize) +
                       ", the largest device group (see docs/frontend.md)");
  if (o.batch > ::braid::limits::kMaxBatch)
    return importError("--batch " + llvm::Twine(o.batch) + " exceeds " +
                       llvm::Twine(::braid::limits::kMaxBatch) +
                       " sequences (see docs/frontend.md)");
  if (o.maxSeq < 0)
    return importError("--max-seq must be >= 1 (or 0: the model's maximum "
                       "positions), got " +
                       llvm::Twine(o.maxSeq));
  l.heads = c.numHeads;
  l.kvHeads = c.numKvHeads;
  l.headDim = c.headDim;
  if (c.numHeads % o.tp != 0)
    return importError("tp " + llvm::Twine(o.tp) +
                       " does not divide the number of attention heads " +
                       llvm::Twine(c.numHeads));
  l.headsLocal = c.numHeads / o.tp;
  if (c.numKvHeads >= o.tp) {
    if (c.numKvHeads % o.tp != 0)
      return importError("tp " + llvm::Twine(o.tp) +
                         " does not divide the number of KV heads " +
                         llvm::Twine(c.numKvHeads));
    l.kvShards = o.tp;
    l.kvHeadsLocal = c.numKvHeads / o.tp;
  } else {
    // Fewer KV heads than ranks: each rank holds one KV head, replicated on
    // tp / kv_heads consecutive ranks.
    if (o.tp % c.numKvHeads != 0)
      return importError("the number of KV heads " +
                         llvm::Twine(c.numKvHeads) +
                         " does not divide tp " + llvm::Twine(o.tp) +
                         ", so KV heads cannot be replicated evenly");
    l.kvShards = c.numKvHeads;
    l.kvHeadsLocal = 1;
  }
  if (c.intermediateSize % o.tp != 0)
    return importError("tp " + llvm::Twine(o.tp) +
                       " does not divide the MLP intermediate size " +
                       llvm::Twine(c.intermediateSize));
  l.interLocal = c.intermediateSize / o.tp;
  l.vocab = c.vocabSize;
  // Megatron pads the vocabulary to a multiple of tp; padded rows are zero
  // and their logits are sliced away after the all_gather.
  l.vocabPadded = llvm::divideCeil(c.vocabSize, o.tp) * o.tp;
  l.batch = o.batch;
  l.seq = o.seq;
  l.maxSeq = o.maxSeq ? o.maxSeq : c.maxPositions;
  if (l.maxSeq > c.maxPositions)
    return importError("--max-seq " + llvm::Twine(l.maxSeq) +
                       " exceeds the model's maximum positions " +
                       llvm::Twine(c.maxPositions));
  if (llvm::Error e = checkIncreasing("--decode-batches", "batch",
                                      o.decodeBatches, o.batch, "--batch"))
    return std::move(e);
  if (llvm::Error e = checkIncreasing("--prefill-buckets", "bucket",
                                      o.prefillBuckets, l.maxSeq, "--max-seq"))
    return std::move(e);
  // With buckets, --seq is the longest prompt the plan must serve (the
  // command line makes it the largest bucket when not given), so some
  // bucket must hold it.
  if (!o.prefillBuckets.empty() && o.seq > o.prefillBuckets.back())
    return importError(
        "--seq " + llvm::Twine(o.seq) +
        " is longer than the largest --prefill-buckets entry " +
        llvm::Twine(o.prefillBuckets.back()) +
        ": a prompt of --seq tokens would fit no prefill function (add " +
        llvm::Twine(o.seq) + " to the list, or use --prefill-buckets auto)");
  if (o.seq > l.maxSeq)
    return importError("--seq " + llvm::Twine(o.seq) +
                       " exceeds the KV-cache capacity (--max-seq) " +
                       llvm::Twine(l.maxSeq));

  // The largest tensors of the module (full parameters, and one rank's
  // activations of a prefill step), checked before anything is built so
  // the message names the fields instead of a verifier error.
  bool gpt2 = c.family == ModelFamily::Gpt2;
  int64_t h = c.hiddenSize;
  std::string hName = gpt2 ? "n_embd" : "hidden_size";
  std::string heads = gpt2 ? "n_head" : "num_attention_heads";
  std::string inter = gpt2 ? "n_inner" : "intermediate_size";
  // The longest prefill: --seq, or the largest bucket.
  int64_t tokens =
      o.prefillBuckets.empty() ? o.seq : o.prefillBuckets.back();
  std::string seqName =
      o.prefillBuckets.empty() ? "--seq" : "the largest prefill bucket";
  std::vector<TensorSizes> tensors = {
      {"the token embedding (and LM head)",
       {{"vocab_size padded to a multiple of tp", l.vocabPadded}, {hName, h}}},
      {"the attention projection weight",
       {{heads, c.numHeads}, {"head_dim", c.headDim}, {hName, h}}},
      {"the MLP weight", {{inter, c.intermediateSize}, {hName, h}}},
      {"the hidden states",
       {{"--batch", o.batch}, {seqName, tokens}, {hName, h}}},
      {"one rank's queries",
       {{"--batch", o.batch},
        {seqName, tokens},
        {heads + " / tp", l.headsLocal},
        {"head_dim", c.headDim}}},
      {"one rank's MLP activations",
       {{"--batch", o.batch},
        {seqName, tokens},
        {inter + " / tp", l.interLocal}}},
      {"the logits",
       {{"--batch", o.batch},
        {o.prefillAllLogits ? seqName : "tokens",
         o.prefillAllLogits ? tokens : 1},
        {"vocab_size padded to a multiple of tp", l.vocabPadded}}},
      {"one rank's KV cache of a layer",
       {{"--batch", o.batch},
        {"--max-seq", l.maxSeq},
        {"KV heads per rank", l.kvHeadsLocal},
        {"head_dim", c.headDim}}},
  };
  if (c.family == ModelFamily::NeoX)
    tensors.push_back({"the fused query_key_value weight",
                       {{"3 x " + hName, 3 * h}, {hName, h}}});
  if (gpt2) {
    tensors.push_back(
        {"the fused c_attn weight", {{hName, h}, {"3 x " + hName, 3 * h}}});
    tensors.push_back({"the position embedding wpe",
                       {{"n_positions", c.maxPositions}, {hName, h}}});
    tensors.push_back({"one rank's fused q/k/v activations",
                       {{"--batch", o.batch},
                        {seqName, tokens},
                        {"3 x " + hName + " / tp", 3 * h / o.tp}}});
  }
  for (const TensorSizes &t : tensors)
    if (llvm::Error e = checkTensorElements(t))
      return std::move(e);
  return l;
}

/// Builds one entry function (prefill or decode) of one rank.
class FunctionBuilder {
public:
  FunctionBuilder(OpBuilder &b, const ModelConfig &c, const ImportOptions &o,
                  const Layout &l, Type elt)
      : b(b), loc(b.getUnknownLoc()), c(c), o(o), l(l), elt(elt),
        tp(FlatSymbolRefAttr::get(b.getContext(), "tp")) {}

  /// `logitRows`: the logits come from the rows a `logit_rows` input
  /// names (a padded bucket), not from each sequence's last token.
  /// `batch`: sequences this function runs (0: --batch); the KV cache
  /// always holds --batch sequences, a smaller decode bucket the first ones.
  void build(StringRef name, int64_t tokens, bool allLogits,
             bool logitRows = false, int64_t batch = 0);

private:
  RankedTensorType t(ArrayRef<int64_t> shape, Type et = {}) {
    return RankedTensorType::get(shape, et ? et : elt);
  }
  static RankedTensorType typeOf(Value v) {
    return cast<RankedTensorType>(v.getType());
  }

  /// This rank's slice of checkpoint tensor `name`.
  Value param(const Twine &name, ArrayRef<int64_t> full,
              std::optional<int64_t> shardDim = std::nullopt,
              int64_t shards = 0, int64_t blocks = 1,
              ArrayRef<int64_t> padded = {}) {
    SmallVector<int64_t> local(padded.empty() ? full : padded);
    if (shards == 0)
      shards = l.tp;
    if (shardDim)
      local[*shardDim] /= shards;
    auto op = ParameterOp::create(
        b, loc, t(local), b.getStringAttr(name.str()),
        b.getDenseI64ArrayAttr(full),
        shardDim ? b.getI64IntegerAttr(*shardDim) : IntegerAttr(),
        shardDim ? tp : FlatSymbolRefAttr(),
        shardDim && shards != l.tp ? b.getI64IntegerAttr(shards)
                                   : IntegerAttr(),
        blocks != 1 ? b.getI64IntegerAttr(blocks) : IntegerAttr(),
        padded.empty() ? DenseI64ArrayAttr()
                       : b.getDenseI64ArrayAttr(padded));
    return op.getResult();
  }

  Value matmul(Value x, Value w, bool transposeB) {
    auto shape = inferMatmulShape(std::nullopt, typeOf(x).getShape(),
                                  typeOf(w).getShape(), false, transposeB);
    assert(succeeded(shape) && "importer built mismatched matmul");
    return MatmulOp::create(b, loc, t(*shape), x, w, false, transposeB);
  }
  /// HF nn.Linear: weight [out, in].
  Value linear(Value x, Value w) { return matmul(x, w, true); }
  Value add(Value x, Value y) { return AddOp::create(b, loc, typeOf(x), x, y); }
  Value mul(Value x, Value y) { return MulOp::create(b, loc, typeOf(x), x, y); }
  Value reshape(Value x, ArrayRef<int64_t> shape) {
    return ReshapeOp::create(b, loc, t(shape, typeOf(x).getElementType()), x);
  }
  Value slice(Value x, ArrayRef<int64_t> offsets, ArrayRef<int64_t> sizes) {
    return SliceOp::create(b, loc, t(sizes, typeOf(x).getElementType()), x,
                           offsets, sizes);
  }
  Value allReduce(Value x) {
    if (l.tp == 1)
      return x;
    return AllReduceOp::create(b, loc, typeOf(x), x, tp,
                               ReduceKindAttr::get(b.getContext(), ReduceKind::sum));
  }
  Value rmsNorm(Value x, Value w) {
    return RmsNormOp::create(b, loc, typeOf(x), x, w,
                             b.getF64FloatAttr(c.normEps));
  }
  Value layerNorm(Value x, Value w, Value bias) {
    return LayerNormOp::create(b, loc, typeOf(x), x, w, bias,
                               b.getF64FloatAttr(c.normEps));
  }

  /// Vocabulary-parallel embedding of the token ids.
  Value embedTokens(Value ids, Value table) {
    SmallVector<int64_t> shape(typeOf(ids).getShape());
    shape.push_back(c.hiddenSize);
    Value e = EmbeddingOp::create(b, loc, t(shape), ids, table,
                                  l.tp > 1 ? tp : FlatSymbolRefAttr());
    return allReduce(e);
  }

  /// Column-parallel LM head over the (padded) vocabulary, then the
  /// all_gather of the logits and removal of the padding.
  Value lmHead(Value x, Value table) {
    Value logits = linear(x, table);
    if (l.tp == 1)
      return unpad(logits);
    if (o.keepLogitsSharded)
      return logits;
    auto in = typeOf(logits);
    SmallVector<int64_t> shape(in.getShape());
    shape[2] *= l.tp;
    Value gathered =
        AllGatherOp::create(b, loc, t(shape), logits, tp, b.getI64IntegerAttr(2));
    return unpad(gathered);
  }
  Value unpad(Value logits) {
    auto in = typeOf(logits);
    if (in.getDimSize(2) == l.vocab)
      return logits;
    return slice(logits, {0, 0, 0},
                 {in.getDimSize(0), in.getDimSize(1), l.vocab});
  }

  /// RoPE of the config (its scaled frequency table when it has one).
  Value rope(Value x) {
    const ::braid::RopeConfig &r = c.rope;
    return RopeOp::create(
        b, loc, typeOf(x), x, positions, b.getF64FloatAttr(r.theta),
        r.invFreq.empty() ? DenseF64ArrayAttr()
                          : b.getDenseF64ArrayAttr(r.invFreq),
        r.attentionFactor != 1.0 ? b.getF64FloatAttr(r.attentionFactor)
                                 : FloatAttr(),
        r.rotaryDim ? b.getI64IntegerAttr(r.rotaryDim) : IntegerAttr());
  }

  /// Cached causal attention over q [B,S,Hq*D], k/v [B,S,Hkv*D] of this
  /// rank; returns [B,S,Hq*D] and updates the layer's caches.
  Value attention(Value q, Value k, Value v, int64_t layer) {
    int64_t bsz = typeOf(q).getDimSize(0), s = typeOf(q).getDimSize(1);
    return attention4(reshape(q, {bsz, s, l.headsLocal, l.headDim}),
                      reshape(k, {bsz, s, l.kvHeadsLocal, l.headDim}),
                      reshape(v, {bsz, s, l.kvHeadsLocal, l.headDim}), layer);
  }
  /// The same over q [B,S,Hq,D], k/v [B,S,Hkv,D].
  Value attention4(Value q4, Value k4, Value v4, int64_t layer) {
    int64_t bsz = typeOf(q4).getDimSize(0), s = typeOf(q4).getDimSize(1);
    if (c.qkNorm) {
      // Qwen3: RMSNorm over each head's D values of q and k, before RoPE.
      std::string p = "model.layers." + std::to_string(layer) + ".self_attn.";
      Value qn = param(p + "q_norm.weight", {l.headDim});
      Value kn = param(p + "k_norm.weight", {l.headDim});
      q4 = rmsNorm(q4, qn);
      k4 = rmsNorm(k4, kn);
    }
    if (c.family != ModelFamily::Gpt2) {
      q4 = rope(q4);
      k4 = rope(k4);
    }
    Value kc = cacheArgs[2 * layer], vc = cacheArgs[2 * layer + 1];
    int64_t window = c.layerWindow.empty() ? 0 : c.layerWindow[size_t(layer)];
    FloatAttr scale;
    if (!c.layerAttentionScale.empty())
      scale = b.getF64FloatAttr(c.layerAttentionScale[size_t(layer)]);
    auto op = AttentionOp::create(
        b, loc, typeOf(q4), TypeRange{kc.getType(), vc.getType()}, q4, k4, v4,
        kc, vc, cachePosition, /*causal=*/true, l.headsLocal, l.kvHeadsLocal,
        l.headDim, scale, window ? b.getI64IntegerAttr(window) : IntegerAttr());
    cacheResults.push_back(op.getUpdatedCache()[0]);
    cacheResults.push_back(op.getUpdatedCache()[1]);
    return reshape(op.getOutput(), {bsz, s, l.headsLocal * l.headDim});
  }

  /// The hidden state [B, 1, H] each sequence's logits come from: its last
  /// token, or with `rows` (a padded bucket) the flattened row it names,
  /// gathered as an embedding lookup over [B * S, H].
  Value lastTokens(Value x, Value rows) {
    auto xt = typeOf(x);
    int64_t bsz = xt.getDimSize(0), s = xt.getDimSize(1),
            h = xt.getDimSize(2);
    if (!rows)
      return slice(x, {0, s - 1, 0}, {bsz, 1, h});
    Value flat = reshape(x, {bsz * s, h});
    return EmbeddingOp::create(b, loc, t({bsz, 1, h}), rows, flat,
                               FlatSymbolRefAttr());
  }

  /// The config's MLP activation of `x`.
  Value activate(Value x) {
    switch (c.activation) {
    case Activation::Silu:
      return SiluOp::create(b, loc, x);
    case Activation::Gelu:
      return GeluOp::create(b, loc, x, GeluApproximation::none);
    case Activation::GeluTanh:
      return GeluOp::create(b, loc, x, GeluApproximation::tanh);
    case Activation::Identity:
      return x;
    case Activation::Other:
      // The config reader accepted the name as a kind.
      return ActivationOp::create(b, loc, x,
                                  *symbolizeActivationKind(c.activationKind));
    }
    llvm_unreachable("unknown activation");
  }

  Value llamaLayer(Value x, int64_t i);
  Value gpt2Layer(Value x, int64_t i);
  Value neoxLayer(Value x, int64_t i);

  OpBuilder &b;
  Location loc;
  const ModelConfig &c;
  const ImportOptions &o;
  const Layout &l;
  Type elt;
  FlatSymbolRefAttr tp;
  // Per function.
  Value positions, cachePosition;
  SmallVector<Value> cacheArgs, cacheResults;
};

Value FunctionBuilder::llamaLayer(Value x, int64_t i) {
  std::string p = "model.layers." + std::to_string(i) + ".";
  int64_t h = c.hiddenSize, d = l.headDim;
  int64_t qOut = l.heads * d, kvOut = l.kvHeads * d;
  Value hdn = rmsNorm(x, param(p + "input_layernorm.weight", {h}));
  Value q = linear(hdn, param(p + "self_attn.q_proj.weight", {qOut, h}, 0));
  Value k = linear(hdn, param(p + "self_attn.k_proj.weight", {kvOut, h}, 0,
                              l.kvShards));
  Value v = linear(hdn, param(p + "self_attn.v_proj.weight", {kvOut, h}, 0,
                              l.kvShards));
  if (c.qkvBias) {
    q = add(q, param(p + "self_attn.q_proj.bias", {qOut}, 0));
    k = add(k, param(p + "self_attn.k_proj.bias", {kvOut}, 0, l.kvShards));
    v = add(v, param(p + "self_attn.v_proj.bias", {kvOut}, 0, l.kvShards));
  }
  Value att = attention(q, k, v, i);
  Value o1 = linear(att, param(p + "self_attn.o_proj.weight", {h, qOut}, 1));
  o1 = allReduce(o1);
  if (c.outputBias) // row-parallel: the replicated bias after the reduction
    o1 = add(o1, param(p + "self_attn.o_proj.bias", {h}));
  x = add(x, o1);

  hdn = rmsNorm(x, param(p + "post_attention_layernorm.weight", {h}));
  int64_t inter = c.intermediateSize;
  Value g = linear(hdn, param(p + "mlp.gate_proj.weight", {inter, h}, 0));
  if (c.mlpBias) // column-parallel: each rank its slice of the bias
    g = add(g, param(p + "mlp.gate_proj.bias", {inter}, 0));
  Value u = linear(hdn, param(p + "mlp.up_proj.weight", {inter, h}, 0));
  if (c.mlpBias)
    u = add(u, param(p + "mlp.up_proj.bias", {inter}, 0));
  Value gu = mul(activate(g), u);
  Value dn = linear(gu, param(p + "mlp.down_proj.weight", {h, inter}, 1));
  dn = allReduce(dn);
  if (c.mlpBias) // row-parallel: the replicated bias after the reduction
    dn = add(dn, param(p + "mlp.down_proj.bias", {h}));
  return add(x, dn);
}

Value FunctionBuilder::gpt2Layer(Value x, int64_t i) {
  std::string p = "h." + std::to_string(i) + ".";
  int64_t h = c.hiddenSize, inter = c.intermediateSize;
  // GPT-2's Conv1D weights are [in, out]: y = x @ W + b.
  // Parameters are created one statement at a time so the IR order does not
  // depend on the compiler's argument evaluation order.
  Value ln1w = param(p + "ln_1.weight", {h});
  Value ln1b = param(p + "ln_1.bias", {h});
  Value hdn = layerNorm(x, ln1w, ln1b);
  Value qkv = matmul(hdn,
                     param(p + "attn.c_attn.weight", {h, 3 * h}, 1, 0, 3),
                     false);
  qkv = add(qkv, param(p + "attn.c_attn.bias", {3 * h}, 0, 0, 3));
  int64_t bsz = typeOf(qkv).getDimSize(0), s = typeOf(qkv).getDimSize(1);
  int64_t part = h / l.tp;
  Value q = slice(qkv, {0, 0, 0}, {bsz, s, part});
  Value k = slice(qkv, {0, 0, part}, {bsz, s, part});
  Value v = slice(qkv, {0, 0, 2 * part}, {bsz, s, part});
  Value att = attention(q, k, v, i);
  Value o1 = matmul(att, param(p + "attn.c_proj.weight", {h, h}, 0), false);
  o1 = allReduce(o1);
  o1 = add(o1, param(p + "attn.c_proj.bias", {h}));
  x = add(x, o1);

  Value ln2w = param(p + "ln_2.weight", {h});
  Value ln2b = param(p + "ln_2.bias", {h});
  hdn = layerNorm(x, ln2w, ln2b);
  Value f = matmul(hdn, param(p + "mlp.c_fc.weight", {h, inter}, 1), false);
  f = add(f, param(p + "mlp.c_fc.bias", {inter}, 0));
  f = activate(f);
  Value dn = matmul(f, param(p + "mlp.c_proj.weight", {inter, h}, 0), false);
  dn = allReduce(dn);
  dn = add(dn, param(p + "mlp.c_proj.bias", {h}));
  return add(x, dn);
}

Value FunctionBuilder::neoxLayer(Value x, int64_t i) {
  std::string p = "gpt_neox.layers." + std::to_string(i) + ".";
  int64_t h = c.hiddenSize, d = l.headDim, inter = c.intermediateSize;
  Value ln1w = param(p + "input_layernorm.weight", {h});
  Value ln1b = param(p + "input_layernorm.bias", {h});
  Value hdn = layerNorm(x, ln1w, ln1b);
  // query_key_value [3H, H]: head-major, each head's q, k and v rows
  // together, so a rank's contiguous block of rows is its heads' q/k/v.
  Value qkv = linear(hdn, param(p + "attention.query_key_value.weight",
                                {3 * h, h}, 0));
  if (c.qkvBias)
    qkv = add(qkv, param(p + "attention.query_key_value.bias", {3 * h}, 0));
  int64_t bsz = typeOf(qkv).getDimSize(0), s = typeOf(qkv).getDimSize(1);
  Value heads = reshape(qkv, {bsz, s, l.headsLocal, 3 * d});
  SmallVector<int64_t> part{bsz, s, l.headsLocal, d};
  Value q = slice(heads, {0, 0, 0, 0}, part);
  Value k = slice(heads, {0, 0, 0, d}, part);
  Value v = slice(heads, {0, 0, 0, 2 * d}, part);
  Value att = attention4(q, k, v, i);
  Value o = linear(att, param(p + "attention.dense.weight", {h, h}, 1));
  o = allReduce(o);
  if (c.outputBias)
    o = add(o, param(p + "attention.dense.bias", {h}));

  auto mlp = [&](Value in) {
    Value ln2w = param(p + "post_attention_layernorm.weight", {h});
    Value ln2b = param(p + "post_attention_layernorm.bias", {h});
    Value n = layerNorm(in, ln2w, ln2b);
    Value f = linear(n, param(p + "mlp.dense_h_to_4h.weight", {inter, h}, 0));
    f = add(f, param(p + "mlp.dense_h_to_4h.bias", {inter}, 0));
    f = activate(f);
    Value dn = linear(f, param(p + "mlp.dense_4h_to_h.weight", {h, inter}, 1));
    dn = allReduce(dn);
    return add(dn, param(p + "mlp.dense_4h_to_h.bias", {h}));
  };
  // transformers' order of the sums (fp32 rounding): mlp + attn + x, or
  // (attn + x) then mlp + that.
  if (c.parallelResidual)
    return add(add(mlp(x), o), x);
  Value a = add(o, x);
  return add(mlp(a), a);
}

void FunctionBuilder::build(StringRef name, int64_t tokens, bool allLogits,
                            bool logitRows, int64_t batch) {
  MLIRContext *ctx = b.getContext();
  Type i32 = b.getI32Type();
  int64_t bsz = batch ? batch : l.batch;
  auto idsType = t({bsz, tokens}, i32);
  auto cacheType = t({l.batch, l.maxSeq, l.kvHeadsLocal, l.headDim});
  int64_t outTokens = allLogits ? tokens : 1;
  int64_t vocabOut = (l.tp > 1 && o.keepLogitsSharded) ? l.vocabPadded / l.tp
                                                       : l.vocab;
  auto logitsType = t({bsz, outTokens, vocabOut});

  SmallVector<Type> inputs{idsType, idsType}, results{logitsType};
  SmallVector<Attribute> argAttrs, resAttrs;
  auto named = [&](StringRef key, StringRef value) {
    return DictionaryAttr::get(
        ctx, {NamedAttribute(b.getStringAttr(key), b.getStringAttr(value))});
  };
  argAttrs.push_back(named("braid.input", "input_ids"));
  argAttrs.push_back(named("braid.input", "positions"));
  logitRows = logitRows && !allLogits;
  if (logitRows) {
    inputs.push_back(t({bsz, 1}, i32));
    argAttrs.push_back(named("braid.input", "logit_rows"));
  }
  NamedAttrList logitsAttrs;
  logitsAttrs.append("braid.output", b.getStringAttr("logits"));
  if (l.tp > 1 && o.keepLogitsSharded)
    // Each rank's logits are its block of the padded vocabulary: braid-run
    // gathers them and drops the padding.
    logitsAttrs.append(
        "braid.sharded",
        b.getDictionaryAttr(
            {b.getNamedAttr("group", FlatSymbolRefAttr::get(ctx, "tp")),
             b.getNamedAttr("dim", b.getI64IntegerAttr(2)),
             b.getNamedAttr("size", b.getI64IntegerAttr(l.vocab))}));
  resAttrs.push_back(logitsAttrs.getDictionary(ctx));
  for (int64_t i = 0; i < c.numLayers; ++i)
    for (StringRef kv : {"k_cache", "v_cache"}) {
      std::string state = "layers." + std::to_string(i) + "." + kv.str();
      inputs.push_back(cacheType);
      results.push_back(cacheType);
      argAttrs.push_back(named("braid.state", state));
      resAttrs.push_back(named("braid.state", state));
    }
  // Named, so that diagnostics about the function say which one.
  auto func =
      func::FuncOp::create(b, NameLoc::get(b.getStringAttr("@" + name.str())),
                           name, b.getFunctionType(inputs, results));
  func.setAllArgAttrs(argAttrs);
  func.setAllResultAttrs(resAttrs);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(func.addEntryBlock());

  Value ids = func.getArgument(0);
  positions = func.getArgument(1);
  Value rows = logitRows ? func.getArgument(2) : Value();
  cacheArgs.assign(func.getArguments().begin() + (logitRows ? 3 : 2),
                   func.getArguments().end());
  cacheResults.clear();
  // The caches are written from each sequence's first position onwards.
  cachePosition = reshape(slice(positions, {0, 0}, {bsz, 1}), {bsz});

  int64_t h = c.hiddenSize;
  SmallVector<int64_t> vocabPad;
  if (l.vocabPadded != l.vocab)
    vocabPad = {l.vocabPadded, h};
  Value x, head;
  if (c.family == ModelFamily::Llama) {
    Value embed = param("model.embed_tokens.weight", {l.vocab, h}, 0, 0, 1,
                        vocabPad);
    x = embedTokens(ids, embed);
    for (int64_t i = 0; i < c.numLayers; ++i)
      x = llamaLayer(x, i);
    if (!allLogits && tokens > 1)
      x = lastTokens(x, rows);
    x = rmsNorm(x, param("model.norm.weight", {h}));
    head = c.tieWordEmbeddings
               ? embed
               : param("lm_head.weight", {l.vocab, h}, 0, 0, 1, vocabPad);
  } else if (c.family == ModelFamily::NeoX) {
    Value embed = param("gpt_neox.embed_in.weight", {l.vocab, h}, 0, 0, 1,
                        vocabPad);
    x = embedTokens(ids, embed);
    for (int64_t i = 0; i < c.numLayers; ++i)
      x = neoxLayer(x, i);
    if (!allLogits && tokens > 1)
      x = lastTokens(x, rows);
    Value lnw = param("gpt_neox.final_layer_norm.weight", {h});
    Value lnb = param("gpt_neox.final_layer_norm.bias", {h});
    x = layerNorm(x, lnw, lnb);
    head = c.tieWordEmbeddings
               ? embed
               : param("embed_out.weight", {l.vocab, h}, 0, 0, 1, vocabPad);
  } else {
    Value wte = param("wte.weight", {l.vocab, h}, 0, 0, 1, vocabPad);
    Value wpe = param("wpe.weight", {c.maxPositions, h});
    x = embedTokens(ids, wte);
    SmallVector<int64_t> shape{bsz, tokens, h};
    x = add(x, EmbeddingOp::create(b, loc, t(shape), positions, wpe,
                                   FlatSymbolRefAttr()));
    for (int64_t i = 0; i < c.numLayers; ++i)
      x = gpt2Layer(x, i);
    if (!allLogits && tokens > 1)
      x = lastTokens(x, rows);
    Value lnfw = param("ln_f.weight", {h});
    Value lnfb = param("ln_f.bias", {h});
    x = layerNorm(x, lnfw, lnfb);
    head = c.tieWordEmbeddings
               ? wte
               : param("lm_head.weight", {l.vocab, h}, 0, 0, 1, vocabPad);
  }
  SmallVector<Value> rets{lmHead(x, head)};
  rets.append(cacheResults.begin(), cacheResults.end());
  func::ReturnOp::create(b, loc, rets);
}

} // namespace

llvm::Expected<OwningOpRef<ModuleOp>> (::braid::importModel)(MLIRContext &ctx, const ModelConfig &config,
                   const ImportOptions &options) {
  // Per-layer lists come from loadModelConfig with one entry per layer; a
  // caller that changes numLayers afterwards must resize them.
  if (!config.layerWindow.empty() &&
      config.layerWindow.size() != size_t(config.numLayers))
    return llvm::createStringError("internal error: the config has " +
                                   std::to_string(config.layerWindow.size()) +
                                   " per-layer attention windows for " +
                                   std::to_string(config.numLayers) +
                                   " layers");
  if (!config.layerAttentionScale.empty() &&
      config.layerAttentionScale.size() != size_t(config.numLayers))
    return llvm::createStringError(
        "internal error: the config has " +
        std::to_string(config.layerAttentionScale.size()) +
        " per-layer attention scales for " + std::to_string(config.numLayers) +
        " layers");
  auto layout = computeLayout(config, options);
  if (!layout)
    return layout.takeError();
  ctx.loadDialect<BraidDialect, func::FuncDialect>();
  OpBuilder b(&ctx);
  Type elt;
  switch (options.dtype) {
  case ::braid::ElementType::BF16:
    elt = b.getBF16Type();
    break;
  case ::braid::ElementType::F16:
    elt = b.getF16Type();
    break;
  case ::braid::ElementType::F32:
    elt = b.getF32Type();
    break;
  }
  OwningOpRef<ModuleOp> module = ModuleOp::create(b.getUnknownLoc());
  (*module)->setAttr("braid.model_type", b.getStringAttr(config.modelType));
  b.setInsertionPointToEnd(module->getBody());
  DeviceGroupOp::create(b, b.getUnknownLoc(), "tp", layout->tp);
  FunctionBuilder fb(b, config, options, *layout, elt);
  if (options.prefillBuckets.empty())
    fb.build("prefill", layout->seq, options.prefillAllLogits);
  for (int64_t bucket : options.prefillBuckets)
    fb.build("prefill_" + std::to_string(bucket), bucket,
             options.prefillAllLogits, /*logitRows=*/true);
  fb.build("decode", 1, /*allLogits=*/true);
  for (int64_t batch : options.decodeBatches)
    if (batch < layout->batch)
      fb.build("decode_" + std::to_string(batch), 1, /*allLogits=*/true,
               /*logitRows=*/false, batch);
  if (failed(verify(*module)))
    return importError("internal error: the imported module does not verify");
  return std::move(module);
}
