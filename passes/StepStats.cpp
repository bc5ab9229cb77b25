//===- StepStats.cpp ------------------------------------------------------===//
#include "passes/StepStats.h"
#include "passes/MemoryPlan.h"

#include "dialect/BraidOps.h"
#include "runtime/CheckedMath.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/Format.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::braid;

static int64_t numElements(Type t) {
  // Verified braid tensors: at most 2^40 elements.
  auto rt = dyn_cast<RankedTensorType>(t);
  return rt && rt.hasStaticShape() ? rt.getNumElements() : 0;
}

int64_t StepStats::collectiveBytes() const {
  int64_t total = 0;
  for (const auto &[name, c] : collectives)
    total += c.bytes;
  return total;
}

namespace {
/// The factors of a matmul's FLOPs: 2 x (result elements) x K.
struct MatmulDims {
  int64_t outElements, k;
};
/// The factors of an attention's FLOPs: 4 x B x heads x head_dim x keys,
/// keys = sum over the S queries of the keys each one sees.
struct AttentionDims {
  int64_t b, s, pos, heads, headDim;
  bool causal;
  int64_t window; // sliding window (causal only); 0: none
};
} // namespace

static MatmulDims matmulDims(MatmulOp op) {
  auto a = cast<RankedTensorType>(op.getA().getType());
  int64_t k = op.getTransposeA() ? a.getDimSize(a.getRank() - 2)
                                 : a.getDimSize(a.getRank() - 1);
  return {numElements(op.getType()), k};
}

static AttentionDims attentionDims(AttentionOp op) {
  auto q = cast<RankedTensorType>(op.getQ().getType());
  AttentionDims d;
  d.b = q.getDimSize(0);
  d.s = q.getDimSize(1);
  d.pos = attentionFirstPosition(op);
  d.heads = int64_t(op.getNumHeads());
  d.headDim = int64_t(op.getHeadDim());
  d.causal = op.getCausal();
  d.window = d.causal ? int64_t(op.getSlidingWindow().value_or(0)) : 0;
  return d;
}

int64_t mlir::braid::attentionFirstPosition(AttentionOp op) {
  auto q = cast<RankedTensorType>(op.getQ().getType());
  if (!op.hasCache())
    return 0;
  int64_t rows = cast<RankedTensorType>(op.getKCache().getType()).getDimSize(1);
  // Token offsets of the slices (dim 1 of [batch, tokens]) between the
  // position operand and the positions input.
  int64_t offset = 0;
  Value v = op.getPosition();
  while (v) {
    if (auto reshape = v.getDefiningOp<ReshapeOp>()) {
      v = reshape.getInput();
    } else if (auto slice = v.getDefiningOp<SliceOp>()) {
      if (slice.getOffsets().size() >= 2)
        offset += slice.getOffsets()[1];
      v = slice.getInput();
    } else {
      break;
    }
  }
  auto arg = dyn_cast_or_null<BlockArgument>(v);
  auto func = arg ? dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp())
                  : func::FuncOp();
  auto name = func ? func.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                       "braid.input")
                   : StringAttr();
  bool fromPositions = name && name.getValue() == "positions" &&
                       cast<RankedTensorType>(arg.getType()).getRank() >= 2;
  // A step of one token per sequence is a decode step: the full cache.
  // (Decided by the positions input when the position comes from it: a
  // prefill cut into one-token chunks is still a prefill.)
  int64_t stepTokens = fromPositions
                           ? cast<RankedTensorType>(arg.getType()).getDimSize(1)
                           : q.getDimSize(1);
  if (stepTokens == 1)
    return std::max<int64_t>(rows - 1, 0);
  if (!fromPositions)
    return 0;
  // A cache holds at most `rows` keys: a query past it is refused at run
  // time, and counts as the last row here.
  return std::clamp<int64_t>(offset, 0, std::max<int64_t>(rows - 1, 0));
}

/// Sum over the S queries of the keys each sees: pos + i + 1 (causal, at
/// most the window) or pos + S, in closed form (a loop over S would run
/// 2^40 times on a long sequence). nullopt past int64.
static std::optional<int64_t> attendedKeys(const AttentionDims &d) {
  using ::braid::checkedAdd;
  using ::braid::checkedMul;
  if (!d.causal) {
    std::optional<int64_t> perQuery = checkedAdd(d.pos, d.s);
    return perQuery ? checkedMul(d.s, *perQuery) : std::nullopt;
  }
  // Queries see n = pos + 1 .. pos + S keys; with a window W, min(n, W):
  // the sum of n over [pos + 1, last] plus W for each query past `last`.
  int64_t first = d.pos + 1, lastFull = d.pos + d.s;
  if (d.window > 0 && d.window < lastFull)
    lastFull = std::max(first - 1, d.window);
  int64_t full = lastFull - first + 1, clipped = d.s - full;
  // (first + lastFull) * full / 2, halving the even factor first (when
  // full is odd, first + lastFull is even).
  int64_t sumA = first + lastFull;
  std::optional<int64_t> tri = full % 2 == 0 ? checkedMul(full / 2, sumA)
                                             : checkedMul(full, sumA / 2);
  std::optional<int64_t> rest = checkedMul(clipped, d.window);
  return tri && rest ? checkedAdd(*tri, *rest) : std::nullopt;
}

std::optional<int64_t> mlir::braid::matmulFlopCount(MatmulOp op) {
  MatmulDims d = matmulDims(op);
  return ::braid::checkedProduct({2, d.outElements, d.k});
}

double mlir::braid::matmulFlops(MatmulOp op) {
  MatmulDims d = matmulDims(op);
  return 2.0 * double(d.outElements) * double(d.k);
}

std::optional<int64_t> mlir::braid::attentionFlopCount(AttentionOp op) {
  using ::braid::checkedAdd;
  using ::braid::checkedMul;
  AttentionDims d = attentionDims(op);
  std::optional<int64_t> keys = attendedKeys(d);
  if (!keys)
    return std::nullopt;
  // QK^T and PV: 2 FLOPs per multiply-add, head_dim each, per head.
  return ::braid::checkedProduct({4, d.b, d.heads, d.headDim, *keys});
}

double mlir::braid::attentionFlops(AttentionOp op) {
  AttentionDims d = attentionDims(op);
  double s = double(d.s), pos = double(d.pos), keys;
  if (std::optional<int64_t> exact = attendedKeys(d)) {
    keys = double(*exact);
  } else {
    // Past int64 (only for absurd shapes): the unwindowed estimate.
    keys = d.causal ? s * pos + s * (s + 1) / 2 : s * (pos + s);
  }
  return 4.0 * double(d.b) * double(d.heads) * double(d.headDim) * keys;
}

llvm::Expected<StepStats> mlir::braid::computeStepStats(func::FuncOp func) {
  StepStats st;
  st.function = func.getSymName().str();
  // The first count that does not fit int64, if any.
  std::string overflow;
  auto add = [&](int64_t &total, std::optional<int64_t> value,
                 const Twine &what) {
    if (!overflow.empty())
      return;
    std::optional<int64_t> sum =
        value ? ::braid::checkedAdd(total, *value) : std::nullopt;
    if (!sum) {
      overflow = what.str();
      return;
    }
    total = *sum;
  };
  for (unsigned i = 0; i < func.getNumArguments(); ++i)
    if (func.getArgAttr(i, "braid.state"))
      add(st.stateBytes, tensorBytes(func.getArgument(i).getType()),
          "kv-cache state bytes");
  func.walk([&](Operation *op) {
    if (auto p = dyn_cast<ParameterOp>(op)) {
      add(st.parameterBytes, tensorBytes(p.getType()), "parameter bytes");
      return;
    }
    if (isa<ParameterPackOp>(op))
      return; // its pieces' bytes, counted with them

    if (op->getDialect() == nullptr ||
        op->getDialect()->getNamespace() != "braid")
      return;
    for (Value r : op->getResults())
      add(st.activationBytes, tensorBytes(r.getType()), "activation bytes");
    llvm::TypeSwitch<Operation *>(op)
        .Case<MatmulOp>([&](auto m) {
          add(st.matmulFlops, matmulFlopCount(m), "matmul FLOPs");
        })
        .Case<AttentionOp>([&](auto a) {
          add(st.attentionFlops, attentionFlopCount(a), "attention FLOPs");
        })
        .Case<AddOp, MulOp, SiluOp, GeluOp, ActivationOp, SwigluOp>(
            [&](Operation *o) {
              add(st.otherFlops, numElements(o->getResult(0).getType()),
                  "other FLOPs");
            })
        .Case<RmsNormOp, AddRmsNormOp, LayerNormOp, RopeOp, SoftmaxOp>(
            [&](Operation *o) {
              add(st.otherFlops,
                  ::braid::checkedMul(4,
                                      numElements(o->getResult(0).getType())),
                  "other FLOPs");
            })
        .Case([&](CollectiveOpInterface c) {
          // Under its kind's name: an async start counts as its sync form.
          StringRef name = stringifyCollectiveKind(c.getCollectiveKind());
          CollectiveStats &cs = st.collectives[name.str()];
          ++cs.count;
          add(cs.bytes, tensorBytes(c.getSizingType()), name + " bytes");
        });
  });
  int64_t flops = 0, collective = 0;
  add(flops, st.matmulFlops, "total FLOPs");
  add(flops, st.attentionFlops, "total FLOPs");
  add(flops, st.otherFlops, "total FLOPs");
  for (const auto &[name, c] : st.collectives)
    add(collective, c.bytes, "collective bytes");
  if (!overflow.empty())
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "@" + st.function + ": the " + overflow +
            " of one step exceed int64 (9223372036854775807); the "
            "statistics would be wrong");
  return st;
}

static std::string human(double v, StringRef unit) {
  const char *prefixes[] = {"", "K", "M", "G", "T", "P"};
  int i = 0;
  while (v >= 1000.0 && i < 5) {
    v /= 1000.0;
    ++i;
  }
  std::string s;
  llvm::raw_string_ostream os(s);
  os << llvm::format("%.2f ", v) << prefixes[i] << unit;
  return s;
}

void mlir::braid::printStepStats(llvm::raw_ostream &os, const StepStats &st) {
  os << "== " << st.function << " (per rank, per step)\n";
  auto row = [&](StringRef k, int64_t v, StringRef unit) {
    os << llvm::format("  %-22s %16lld  (%s)\n", k.str().c_str(),
                       (long long)v, human((double)v, unit).c_str());
  };
  row("parameter bytes", st.parameterBytes, "B");
  row("kv-cache state bytes", st.stateBytes, "B");
  row("activation bytes", st.activationBytes, "B");
  row("flops", st.totalFlops(), "FLOP");
  row("  matmul", st.matmulFlops, "FLOP");
  row("  attention", st.attentionFlops, "FLOP");
  row("  other", st.otherFlops, "FLOP");
  row("collective bytes", st.collectiveBytes(), "B");
  for (const auto &[name, c] : st.collectives)
    os << llvm::format("  %-22s %16lld  (%s in %lld ops)\n",
                       ("  " + name).c_str(), (long long)c.bytes,
                       human((double)c.bytes, "B").c_str(), (long long)c.count);
}

llvm::Error mlir::braid::printModuleStepStats(llvm::raw_ostream &os,
                                              ModuleOp module) {
  std::vector<StepStats> all;
  for (auto func : module.getOps<func::FuncOp>()) {
    auto st = computeStepStats(func);
    if (!st)
      return st.takeError();
    all.push_back(std::move(*st));
  }
  for (const StepStats &st : all)
    printStepStats(os, st);
  return llvm::Error::success();
}
