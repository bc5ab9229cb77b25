//===- AssignStreams.cpp - braid-assign-streams ---------------------------===//
//
// Compute on stream 0, each device group's collectives on a stream of
// their own (see Passes.td). braid-insert-events orders the streams.
//
//===----------------------------------------------------------------------===//
#include "dialect/Diagnostics.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringMap.h"

namespace mlir::braid {
#define GEN_PASS_DEF_BRAIDASSIGNSTREAMSPASS
#include "passes/Passes.h.inc"
} // namespace mlir::braid

using namespace mlir;
using namespace mlir::braid;

namespace {

struct BraidAssignStreamsPass
    : public mlir::braid::impl::BraidAssignStreamsPassBase<
          BraidAssignStreamsPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    // Stream 1 + g for the g-th device group, in declaration order.
    llvm::StringMap<int64_t> streamOf;
    for (auto group : module.getOps<DeviceGroupOp>())
      streamOf[group.getSymName()] = 1 + int64_t(streamOf.size());
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      bool async = false, scheduled = false;
      func.walk([&](Operation *op) {
        async |= op->hasTrait<OpTrait::BraidAsyncStart>();
        scheduled |= getStream(op).has_value();
      });
      if (async && !scheduled && failed(assign(func, streamOf)))
        return signalPassFailure();
    }
  }

  LogicalResult assign(func::FuncOp func,
                       const llvm::StringMap<int64_t> &streamOf) {
    Block &body = func.getBody().front();
    SmallVector<Operation *> ops;
    for (Operation &op : body)
      ops.push_back(&op);
    for (Operation *op : ops) {
      if (isa<ParameterOp, ParameterPackOp>(op) ||
          op->hasTrait<OpTrait::IsTerminator>())
        continue;
      auto coll = dyn_cast<CollectiveOpInterface>(op);
      if (!coll) {
        setStream(op, 0);
        continue;
      }
      auto it = streamOf.find(coll.getGroupAttr().getValue());
      if (it == streamOf.end())
        return emitOpErrorAt(op, "names device group @")
               << coll.getGroupAttr().getValue()
               << " that the module does not declare";
      if (coll.isAsyncStart()) {
        setStream(op, it->second);
        continue;
      }
      // A synchronous collective: a start on its group's stream and the
      // wait right after it, so the group keeps one communicator.
      if (!hasAsyncForm(op))
        return emitOpErrorAt(op, "is a collective braid-assign-streams cannot "
                                 "move to its group's stream");
      OpBuilder b(op);
      Operation *start = createAsyncStart(b, op);
      setStream(start, it->second);
      auto wait = WaitOp::create(b, op->getLoc(), op->getResult(0).getType(),
                                 start->getResult(0));
      setStream(wait, 0);
      op->getResult(0).replaceAllUsesWith(wait.getResult());
      op->erase();
    }
    return success();
  }
};

} // namespace
