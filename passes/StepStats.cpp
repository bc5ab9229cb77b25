//===- StepStats.cpp ------------------------------------------------------===//
#include "passes/StepStats.h"
#include "passes/MemoryPlan.h"

#include "dialect/BraidOps.h"

#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/Format.h"

using namespace mlir;
using namespace mlir::braid;

static int64_t numElements(Type t) {
  auto rt = dyn_cast<RankedTensorType>(t);
  return rt ? rt.getNumElements() : 0;
}

int64_t StepStats::collectiveBytes() const {
  int64_t total = 0;
  for (const auto &[name, c] : collectives)
    total += c.bytes;
  return total;
}

int64_t mlir::braid::matmulFlopCount(MatmulOp op) {
  auto a = cast<RankedTensorType>(op.getA().getType());
  int64_t k = op.getTransposeA() ? a.getDimSize(a.getRank() - 2)
                                 : a.getDimSize(a.getRank() - 1);
  return 2 * numElements(op.getType()) * k;
}

int64_t mlir::braid::attentionFlopCount(AttentionOp op) {
  auto q = cast<RankedTensorType>(op.getQ().getType());
  int64_t b = q.getDimSize(0), s = q.getDimSize(1);
  int64_t pos = 0;
  if (op.hasCache() && s == 1)
    pos = cast<RankedTensorType>(op.getKCache().getType()).getDimSize(1) - 1;
  // Keys seen by query i: pos + i + 1 (causal) or all of them.
  int64_t keys = 0;
  for (int64_t i = 0; i < s; ++i)
    keys += op.getCausal() ? pos + i + 1 : pos + s;
  // QK^T and PV: 2 FLOPs per multiply-add, head_dim each, per head.
  return 4 * b * op.getNumHeads() * op.getHeadDim() * keys;
}

StepStats mlir::braid::computeStepStats(func::FuncOp func) {
  StepStats st;
  st.function = func.getSymName().str();
  for (unsigned i = 0; i < func.getNumArguments(); ++i)
    if (func.getArgAttr(i, "braid.state"))
      st.stateBytes += tensorBytes(func.getArgument(i).getType());
  auto addCollective = [&](StringRef name, int64_t bytes) {
    CollectiveStats &c = st.collectives[name.str()];
    ++c.count;
    c.bytes += bytes;
  };
  func.walk([&](Operation *op) {
    if (auto p = dyn_cast<ParameterOp>(op)) {
      st.parameterBytes += tensorBytes(p.getType());
      return;
    }
    if (op->getDialect() == nullptr ||
        op->getDialect()->getNamespace() != "braid")
      return;
    for (Value r : op->getResults())
      st.activationBytes += tensorBytes(r.getType());
    llvm::TypeSwitch<Operation *>(op)
        .Case<MatmulOp>([&](auto m) { st.matmulFlops += matmulFlopCount(m); })
        .Case<AttentionOp>(
            [&](auto a) { st.attentionFlops += attentionFlopCount(a); })
        .Case<AddOp, MulOp, SiluOp, GeluOp>([&](Operation *o) {
          st.otherFlops += numElements(o->getResult(0).getType());
        })
        .Case<RmsNormOp, LayerNormOp, RopeOp, SoftmaxOp>([&](Operation *o) {
          st.otherFlops += 4 * numElements(o->getResult(0).getType());
        })
        .Case([&](CollectiveOpInterface c) {
          // Under its kind's name: an async start counts as its sync form.
          addCollective(stringifyCollectiveKind(c.getCollectiveKind()),
                        tensorBytes(c.getSizingType()));
        });
  });
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
