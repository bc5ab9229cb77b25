//===- MemoryPlan.cpp - Buffer lifetimes and arena placement --------------===//
#include "passes/MemoryPlan.h"

#include "dialect/BraidOps.h"
#include "dialect/Diagnostics.h"
#include "dialect/ShapeChecks.h"
#include "passes/analysis/PointToPointGroups.h"
#include "runtime/CheckedMath.h"
#include "runtime/Views.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/STLExtras.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::braid;

/// No overflow: bytes <= 2^43 (the dialect's limits) and alignment <= 2^62.
static int64_t alignTo(int64_t bytes, int64_t alignment) {
  return (bytes + alignment - 1) / alignment * alignment;
}

int64_t mlir::braid::tensorBytes(Type type) {
  // The dialect's limits (2^40 elements of at most 8 bytes) keep this far
  // from overflow; a type outside them (not a braid tensor) has no bytes.
  return tensorByteSize(type).value_or(0);
}

static bool isStateArgument(Value v) {
  auto arg = dyn_cast<BlockArgument>(v);
  if (!arg)
    return false;
  auto func = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
  return func && func.getArgAttr(arg.getArgNumber(), "braid.state");
}

Operation *mlir::braid::laterReaderOfOldCache(Operation *attention,
                                              Value cache) {
  // An async collective reads its input until its wait, so a start before
  // the attention whose wait comes after it is such a reader too. The
  // earliest in block order (use lists are not), so messages are stable.
  Operation *earliest = nullptr;
  for (Operation *user : cache.getUsers()) {
    Operation *lastRead = user;
    if (user->hasTrait<OpTrait::BraidAsyncStart>())
      for (Operation *wait : user->getResult(0).getUsers())
        if (lastRead->isBeforeInBlock(wait))
          lastRead = wait;
    if (user != attention && attention->isBeforeInBlock(lastRead) &&
        (!earliest || user->isBeforeInBlock(earliest)))
      earliest = user;
  }
  return earliest;
}

std::optional<unsigned> mlir::braid::stateArgumentOf(Value v) {
  if (isStateArgument(v))
    return cast<BlockArgument>(v).getArgNumber();
  auto result = dyn_cast<OpResult>(v);
  if (!result)
    return std::nullopt;
  auto attention = dyn_cast<AttentionOp>(result.getOwner());
  if (!attention || result.getResultNumber() == 0)
    return std::nullopt;
  Value cache = result.getResultNumber() == 1 ? attention.getKCache()
                                              : attention.getVCache();
  std::optional<unsigned> slot = stateArgumentOf(cache);
  if (!slot || laterReaderOfOldCache(attention, cache))
    return std::nullopt;
  // Both caches of one attention must not share a slot.
  if (result.getResultNumber() == 2 &&
      stateArgumentOf(attention->getResult(1)) == slot)
    return std::nullopt;
  return slot;
}

bool mlir::braid::needsArenaBuffer(Value v) {
  if (!isa<RankedTensorType>(v.getType()))
    return false;
  if (v.getDefiningOp<ParameterOp>() || v.getDefiningOp<ParameterPackOp>())
    return false;
  return !stateArgumentOf(v);
}

std::optional<ViewOf> mlir::braid::viewOf(Value v) {
  Operation *def = v.getDefiningOp();
  if (!def || !isa<ReshapeOp, SliceOp>(def))
    return std::nullopt;
  Value source = def->getOperand(0);
  auto in = dyn_cast<RankedTensorType>(source.getType());
  auto out = dyn_cast<RankedTensorType>(v.getType());
  if (!in || !out || !in.hasStaticShape() || !out.hasStaticShape() ||
      in.getElementType() != out.getElementType() || !needsArenaBuffer(v) ||
      !needsArenaBuffer(source))
    return std::nullopt;
  if (isa<ReshapeOp>(def))
    return in.getNumElements() == out.getNumElements()
               ? std::optional<ViewOf>(ViewOf{source, 0})
               : std::nullopt;
  auto slice = cast<SliceOp>(def);
  ArrayRef<int64_t> offsets = slice.getOffsets(), sizes = slice.getSizes();
  if (offsets.size() != size_t(in.getRank()) ||
      sizes.size() != size_t(in.getRank()))
    return std::nullopt;
  std::optional<int64_t> start = ::braid::contiguousSliceStart(
      in.getShape().data(), offsets.data(), sizes.data(), sizes.size());
  if (!start)
    return std::nullopt;
  return ViewOf{source, *start * *elementByteSize(in.getElementType())};
}

ViewOf mlir::braid::viewRoot(Value v) {
  ViewOf root{v, 0};
  while (std::optional<ViewOf> up = viewOf(root.source))
    root = ViewOf{up->source, root.byteOffset + up->byteOffset};
  return root;
}

Ordering mlir::braid::programOrder() {
  return {[](int a, int b) { return a < b; }, [](int p) { return p - 1; }};
}

FailureOr<SmallVector<BufferLifetime>>
mlir::braid::computeLifetimes(func::FuncOp func, int64_t alignment) {
  if (!func.getBody().hasOneBlock())
    return emitOpErrorAt(func, "memory planning needs a single-block body"),
           failure();
  Block &body = func.getBody().front();
  llvm::DenseMap<Operation *, int> position;
  for (auto [i, op] : llvm::enumerate(body))
    position[&op] = int(i);
  int end = int(body.getOperations().size()) - 1; // the terminator
  // Sends and receives issued as one group run together: each reads its
  // operands and writes its results from the group's first op to its last.
  PointToPointGroups groups = findPointToPointGroups(body);
  auto groupFirst = [&](Operation *op) {
    auto it = groups.find(op);
    return position.lookup(it == groups.end() ? op : it->second.first);
  };
  auto groupLast = [&](Operation *op) {
    auto it = groups.find(op);
    return position.lookup(it == groups.end() ? op : it->second.second);
  };

  // Point from which each value's buffer is live: its definition, except a
  // wait's payload, which the collective writes from its start onward, and
  // a grouped receive's, from its group's start.
  auto defPoint = [&](Value v) -> int {
    if (isa<BlockArgument>(v))
      return -1;
    Operation *def = v.getDefiningOp();
    if (auto wait = dyn_cast<WaitOp>(def))
      if (Operation *start = wait.getHandle().getDefiningOp())
        return groupFirst(start);
    return groupFirst(def);
  };

  // Views share their root's buffer: its lifetime takes their uses.
  llvm::DenseMap<Value, SmallVector<std::pair<Value, int64_t>>> viewsOf;
  for (Operation &op : body)
    for (Value result : op.getResults())
      if (viewOf(result)) {
        ViewOf root = viewRoot(result);
        viewsOf[root.source].push_back({result, root.byteOffset});
      }

  SmallVector<BufferLifetime> lifetimes;
  auto add = [&](Value v) -> LogicalResult {
    if (!needsArenaBuffer(v) || viewOf(v))
      return success();
    auto type = cast<RankedTensorType>(v.getType());
    if (!type.hasStaticShape())
      return emitError(v.getLoc()) << "memory planning needs static shapes, "
                                   << "got " << type,
             failure();
    // Values of other dialects' ops or unbound arguments: only braid tensor
    // types have a size in the arena.
    if (failed(checkTensorType(v.getLoc(), "memory planning", "value", type)))
      return failure();
    BufferLifetime life;
    life.value = v;
    life.size = alignTo(std::max<int64_t>(tensorBytes(type), 1), alignment);
    life.def = defPoint(v);
    auto addUses = [&](Value reader) {
      for (OpOperand &use : reader.getUses()) {
        Operation *user = use.getOwner();
        // An async collective reads its input until the matching wait.
        if (user->hasTrait<OpTrait::BraidAsyncStart>()) {
          for (Operation *waitOp : user->getResult(0).getUsers())
            life.uses.push_back(position.lookup(waitOp));
          continue;
        }
        life.uses.push_back(groupLast(user));
      }
    };
    addUses(v);
    // A grouped receive writes its result until its group's last op.
    if (Operation *def = v.getDefiningOp(); def && groups.count(def))
      life.uses.push_back(groupLast(def));
    // A collective writes its payload until its wait, read or not.
    if (auto wait = dyn_cast_or_null<WaitOp>(v.getDefiningOp()))
      life.uses.push_back(position.lookup(wait));
    if (auto it = viewsOf.find(v); it != viewsOf.end()) {
      life.views = it->second;
      for (auto [view, offset] : it->second)
        addUses(view);
    }
    // Written but never read: still occupied while its producer runs.
    if (life.uses.empty())
      life.uses.push_back(std::max(life.def, 0));
    // The runtime reads outputs and state after the last op.
    if (llvm::is_contained(life.uses, end))
      life.uses.push_back(end + 1);
    lifetimes.push_back(std::move(life));
    return success();
  };
  for (BlockArgument arg : body.getArguments())
    if (failed(add(arg)))
      return failure();
  for (Operation &op : body)
    for (Value result : op.getResults())
      if (failed(add(result)))
        return failure();
  return lifetimes;
}


/// Every use of `first` happens before `second`'s definition.
static bool allBefore(const BufferLifetime &first, const BufferLifetime &second,
                      const Ordering &order) {
  return llvm::all_of(first.uses,
                      [&](int use) { return order.before(use, second.def); });
}

/// Pairs of buffers that may not share bytes, as adjacency lists. Two
/// lifetimes whose [def, last use] spans overlap in block order always
/// conflict (happens-before is contained in block order): a sweep finds
/// them. A lifetime that ends before another begins conflicts only if its
/// last use falls after the later one's horizon, where streams have not
/// synchronized yet: only those few are checked with `order`.
static std::vector<SmallVector<unsigned>>
conflictGraph(ArrayRef<BufferLifetime> lives, ArrayRef<int> lastUse,
              const Ordering &order) {
  std::vector<SmallVector<unsigned>> adj(lives.size());
  SmallVector<unsigned> byDef(lives.size()), byEnd(lives.size());
  for (unsigned i = 0; i < lives.size(); ++i)
    byDef[i] = byEnd[i] = i;
  llvm::stable_sort(byDef, [&](unsigned a, unsigned b) {
    return lives[a].def < lives[b].def;
  });
  llvm::stable_sort(byEnd, [&](unsigned a, unsigned b) {
    return lastUse[a] < lastUse[b];
  });
  auto connect = [&](unsigned a, unsigned b) {
    adj[a].push_back(b);
    adj[b].push_back(a);
  };
  SmallVector<unsigned> active; // defined, last use not yet passed
  for (unsigned b : byDef) {
    int def = lives[b].def;
    llvm::erase_if(active, [&](unsigned a) { return lastUse[a] < def; });
    for (unsigned a : active)
      connect(a, b);
    active.push_back(b);
    // Ended before `def` but after its horizon: ordered only if every use
    // happens before it.
    int horizon = order.horizon(def);
    auto first = llvm::upper_bound(byEnd, horizon, [&](int h, unsigned a) {
      return h < lastUse[a];
    });
    for (auto it = first; it != byEnd.end() && lastUse[*it] < def; ++it)
      if (!allBefore(lives[*it], lives[b], order))
        connect(*it, b);
  }
  return adj;
}

FailureOr<FunctionMemoryPlan>
mlir::braid::planFunctionMemory(func::FuncOp func, bool reuse,
                                int64_t alignment, const Ordering &order) {
  auto lifetimes = computeLifetimes(func, alignment);
  if (failed(lifetimes))
    return failure();
  FunctionMemoryPlan plan;
  plan.lifetimes = std::move(*lifetimes);
  const SmallVector<BufferLifetime> &lives = plan.lifetimes;

  // A long-lived buffer has a use per layer: its last use is computed once.
  SmallVector<int> lastUse;
  for (const BufferLifetime &l : lives) {
    // Every offset and the lower bound are at most this sum: checking it
    // keeps all placement arithmetic in range.
    std::optional<int64_t> total =
        ::braid::checkedAdd(plan.withoutReuse, l.size);
    if (!total)
      return emitOpErrorAt(func, "buffers total more than int64 bytes"),
             failure();
    plan.withoutReuse = *total;
    plan.sizes[l.value] = l.size;
    lastUse.push_back(*llvm::max_element(l.uses));
  }

  // Lower bound: the most bytes whose block-order spans cover one point.
  // Such buffers conflict pairwise, so no placement can do better. A sweep
  // over span starts (+size) and ends (-size after the last use).
  SmallVector<std::pair<int64_t, int64_t>> sweep; // (2*point + end?, delta)
  for (auto [l, last] : llvm::zip_equal(lives, lastUse)) {
    sweep.push_back({2 * int64_t(l.def), l.size});
    sweep.push_back({2 * int64_t(last) + 1, -l.size});
  }
  llvm::sort(sweep);
  int64_t live = 0;
  for (auto [point, delta] : sweep) {
    live += delta;
    plan.lowerBound = std::max(plan.lowerBound, live);
  }

  // A view sits inside its root's buffer; its size is its own bytes.
  auto placeViews = [&](const BufferLifetime &l, int64_t offset) {
    for (auto [view, delta] : l.views) {
      plan.offsets[view] = offset + delta;
      plan.sizes[view] = std::max<int64_t>(tensorBytes(view.getType()), 1);
    }
  };
  if (!reuse) {
    int64_t offset = 0;
    for (const BufferLifetime &l : lives) {
      plan.offsets[l.value] = offset;
      placeViews(l, offset);
      offset += l.size;
    }
    plan.arenaSize = offset;
    return plan;
  }

  std::vector<SmallVector<unsigned>> adj = conflictGraph(lives, lastUse, order);
  // Greedy by size (as TFLite's arena planner): big buffers are the hardest
  // to fit, so they go first; ties keep definition order for stability.
  SmallVector<unsigned> bySize(lives.size());
  for (unsigned i = 0; i < lives.size(); ++i)
    bySize[i] = i;
  llvm::stable_sort(bySize, [&](unsigned a, unsigned b) {
    return lives[a].size > lives[b].size;
  });
  std::vector<int64_t> offsetOf(lives.size(), -1);
  SmallVector<std::pair<int64_t, int64_t>> blocking; // (offset, size)
  for (unsigned i : bySize) {
    blocking.clear();
    for (unsigned p : adj[i])
      if (offsetOf[p] >= 0)
        blocking.push_back({offsetOf[p], lives[p].size});
    llvm::sort(blocking);
    int64_t offset = 0;
    for (auto [at, size] : blocking) {
      if (at >= offset + lives[i].size)
        break; // the gap before this one fits
      offset = std::max(offset, at + size);
    }
    offsetOf[i] = offset;
    plan.offsets[lives[i].value] = offset;
    placeViews(lives[i], offset);
    plan.arenaSize = std::max(plan.arenaSize, offset + lives[i].size);
  }
  return plan;
}

/// The error for a value marked (-1, 0), in place in a state slot, that
/// needs an arena buffer (needsArenaBuffer).
static void inPlaceRefusal(Operation *op, Value v) {
  InFlightDiagnostic d = emitError(op->getLoc());
  d << "buffer (-1, 0) marks a value updated in place in its state slot, "
       "but ";
  auto result = dyn_cast<OpResult>(v);
  auto attention = dyn_cast<AttentionOp>(op);
  if (!result || !attention || result.getResultNumber() == 0) {
    d << "only an attention's updated KV caches are; this value needs "
      << tensorBytes(v.getType()) << " bytes of the arena";
    return;
  }
  Value cache = result.getResultNumber() == 1 ? attention.getKCache()
                                              : attention.getVCache();
  const char *which = result.getResultNumber() == 1 ? "k" : "v";
  if (!stateArgumentOf(cache)) {
    d << "the " << which
      << " cache operand is not a state argument (nor a cache updated in "
         "place); give the result an arena buffer";
    return;
  }
  if (Operation *reader = laterReaderOfOldCache(attention, cache)) {
    d << "'" << reader->getName() << "' reads the old " << which
      << " cache after the attention"
      << (reader->hasTrait<OpTrait::BraidAsyncStart>() ? " (until its wait)"
                                                       : "")
      << "; give the result an arena buffer (braid-plan-memory), or read "
         "the cache before the attention";
    d.attachNote(reader->getLoc()) << "the later reader of the old cache";
    return;
  }
  d << "the k and v caches share one state slot; give the v cache result "
       "an arena buffer";
}

FailureOr<std::optional<FunctionMemoryPlan>>
mlir::braid::readAttachedMemoryPlan(func::FuncOp func) {
  auto arenaAttr = func->getAttrOfType<IntegerAttr>(kArenaSizeAttr);
  if (!arenaAttr)
    return std::optional<FunctionMemoryPlan>();
  FunctionMemoryPlan plan;
  plan.arenaSize = arenaAttr.getInt();
  if (plan.arenaSize < 0)
    return emitOpErrorAt(func, "has a negative ")
               << kArenaSizeAttr << " " << plan.arenaSize,
           failure();
  if (auto lb = func->getAttrOfType<IntegerAttr>(kArenaLowerBoundAttr))
    plan.lowerBound = lb.getInt();

  auto place = [&](Operation *diagOp, Value v, int64_t offset,
                   int64_t size) -> LogicalResult {
    int64_t need = tensorBytes(v.getType());
    // (-1, 0) is what braid-plan-memory writes for a KV cache updated in
    // its state slot: say why this value cannot be.
    if (offset == -1 && size == 0)
      return inPlaceRefusal(diagOp, v), failure();
    if (size < need)
      return emitError(diagOp->getLoc())
                 << "buffer [" << offset << ", +" << size
                 << ") is smaller than its value of " << need << " bytes",
             failure();
    // arena - offset, not offset + size: hand-written numbers may be huge.
    if (offset < 0 || offset > plan.arenaSize || size > plan.arenaSize - offset)
      return emitError(diagOp->getLoc())
                 << "buffer [" << offset << ", +" << size << ") for a value of "
                 << need << " bytes does not fit the arena of "
                 << plan.arenaSize << " bytes",
             failure();
    // The kernels index buffers as arrays of their elements (the loader
    // refuses the same plans).
    Type element = getElementTypeOrSelf(v.getType());
    int64_t elementBytes = elementByteSize(element).value_or(1);
    if (offset % elementBytes != 0)
      return emitError(diagOp->getLoc())
                 << "buffer [" << offset << ", +" << size << ") for a value of "
                 << element << " elements is not aligned to their "
                 << elementBytes << " bytes",
             failure();
    plan.offsets[v] = offset;
    plan.sizes[v] = size;
    return success();
  };
  for (BlockArgument arg : func.getArguments()) {
    if (!needsArenaBuffer(arg))
      continue;
    auto attr = func.getArgAttrOfType<DenseI64ArrayAttr>(arg.getArgNumber(),
                                                         kBufferArgAttr);
    if (!attr || attr.size() != 2)
      return emitOpErrorAt(func, "argument #")
                 << arg.getArgNumber() << " needs a '" << kBufferArgAttr
                 << "' = array<i64: offset, size> after memory planning",
             failure();
    if (failed(place(func, arg, attr[0], attr[1])))
      return failure();
  }
  WalkResult walk = func.walk([&](Operation *op) {
    if (!llvm::any_of(op->getResults(), needsArenaBuffer))
      return WalkResult::advance();
    auto attr = op->getAttrOfType<DenseI64ArrayAttr>(kBuffersAttr);
    if (!attr || attr.size() != int64_t(2 * op->getNumResults())) {
      emitOpErrorAt(op, "needs a '")
          << kBuffersAttr << "' attribute with an (offset, size) pair per "
          << "result after memory planning";
      return WalkResult::interrupt();
    }
    for (OpResult r : op->getResults())
      if (needsArenaBuffer(r) &&
          failed(place(op, r, attr[2 * r.getResultNumber()],
                       attr[2 * r.getResultNumber() + 1])))
        return WalkResult::interrupt();
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return failure();
  return std::optional<FunctionMemoryPlan>(std::move(plan));
}

void mlir::braid::attachMemoryPlan(func::FuncOp func,
                                   const FunctionMemoryPlan &plan) {
  Builder b(func.getContext());
  const llvm::DenseMap<Value, int64_t> &sizes = plan.sizes;
  for (BlockArgument arg : func.getArguments())
    if (plan.offsets.count(arg))
      func.setArgAttr(arg.getArgNumber(), kBufferArgAttr,
                      b.getDenseI64ArrayAttr(
                          {plan.offsets.lookup(arg), sizes.lookup(arg)}));
  func.walk([&](Operation *op) {
    if (!llvm::any_of(op->getResults(), needsArenaBuffer))
      return;
    SmallVector<int64_t> pairs;
    for (Value r : op->getResults()) {
      auto it = plan.offsets.find(r);
      pairs.push_back(it == plan.offsets.end() ? -1 : it->second);
      pairs.push_back(it == plan.offsets.end() ? 0 : sizes.lookup(r));
    }
    op->setAttr(kBuffersAttr, b.getDenseI64ArrayAttr(pairs));
  });
  func->setAttr(kArenaSizeAttr, b.getI64IntegerAttr(plan.arenaSize));
  func->setAttr(kArenaLowerBoundAttr, b.getI64IntegerAttr(plan.lowerBound));
}
