//===- NarrowGathers.cpp - braid-narrow-gathers ---------------------------===//
#include "passes/NarrowGathers.h"
#include "passes/Passes.h"

#include "dialect/BraidOps.h"

namespace mlir::braid {
#define GEN_PASS_DEF_BRAIDNARROWGATHERSPASS
#include "passes/Passes.h.inc"
} // namespace mlir::braid

using namespace mlir;
using namespace mlir::braid;

namespace {

/// A slice of the gather's result, as offsets and sizes in its coordinates,
/// and the op whose result it is.
struct Reader {
  SliceOp op;
  SmallVector<int64_t> offsets, sizes;
};

/// `reader` of `gather`'s result from the gather's input: the slice of each
/// rank's piece, gathered, and the piece of the rank that held the range;
/// null where the range crosses pieces without covering the dim, or where
/// each rank would gather as much as its whole piece.
Value narrowRead(AllGatherOp gather, Reader reader) {
  auto pieceType = cast<RankedTensorType>(gather.getInput().getType());
  auto outType = cast<RankedTensorType>(reader.op.getType());
  size_t d = size_t(gather.getDim());
  int64_t piece = pieceType.getDimSize(int64_t(d));
  int64_t ranks =
      cast<RankedTensorType>(gather.getType()).getDimSize(int64_t(d)) / piece;
  int64_t begin = reader.offsets[d], size = reader.sizes[d];
  int64_t owner = begin / piece;
  bool inOnePiece = size > 0 && (begin + size - 1) / piece == owner;
  bool wholeDim = begin == 0 && size == piece * ranks;
  if (!inOnePiece && !wholeDim)
    return {};
  SmallVector<int64_t> offsets(reader.offsets), sizes(reader.sizes);
  if (inOnePiece)
    offsets[d] = begin - owner * piece;
  else
    sizes[d] = piece;
  int64_t kept = 1;
  for (int64_t n : sizes)
    kept *= n;
  if (kept >= pieceType.getNumElements())
    return {};
  OpBuilder b(reader.op);
  Location loc = reader.op.getLoc();
  Type element = pieceType.getElementType();
  Value mine = SliceOp::create(b, loc, RankedTensorType::get(sizes, element),
                               gather.getInput(), offsets, sizes);
  SmallVector<int64_t> gatheredShape(sizes);
  gatheredShape[d] *= ranks;
  Value gathered =
      AllGatherOp::create(b, loc, RankedTensorType::get(gatheredShape, element),
                          mine, gather.getGroupAttr(), gather.getDimAttr());
  if (!inOnePiece)
    return gathered;
  SmallVector<int64_t> pick(outType.getRank(), 0);
  pick[d] = owner * size;
  return SliceOp::create(b, loc, outType, gathered, pick, outType.getShape());
}

} // namespace

void mlir::braid::narrowSlicedGathers(Operation *root) {
  SmallVector<AllGatherOp> gathers;
  root->walk([&](AllGatherOp g) { gathers.push_back(g); });
  for (AllGatherOp gather : gathers) {
    // Slices of the gather, and slices of those slices (read through).
    SmallVector<Reader> readers;
    for (Operation *user : llvm::to_vector(gather->getUsers())) {
      auto slice = dyn_cast<SliceOp>(user);
      if (!slice ||
          llvm::any_of(readers, [&](const Reader &r) { return r.op == slice; }))
        continue;
      readers.push_back({slice, SmallVector<int64_t>(slice.getOffsets()),
                         SmallVector<int64_t>(slice.getSizes())});
    }
    for (size_t i = 0; i < readers.size(); ++i) {
      Reader reader = readers[i];
      if (Value narrow = narrowRead(gather, reader)) {
        reader.op.getResult().replaceAllUsesWith(narrow);
        reader.op->erase();
        continue;
      }
      // Its own slices may each lie in one piece (the pad-dropping slice
      // of sequence parallelism, then the last token).
      for (Operation *user : llvm::to_vector(reader.op->getUsers()))
        if (auto inner = dyn_cast<SliceOp>(user)) {
          Reader composed{inner, SmallVector<int64_t>(inner.getOffsets()),
                          SmallVector<int64_t>(inner.getSizes())};
          for (auto [o, base] :
               llvm::zip_equal(composed.offsets, reader.offsets))
            o += base;
          if (Value narrow = narrowRead(gather, composed)) {
            inner.getResult().replaceAllUsesWith(narrow);
            inner->erase();
          }
        }
      if (reader.op->use_empty())
        reader.op->erase();
    }
    if (gather->use_empty())
      gather->erase();
  }
}

namespace {
struct BraidNarrowGathersPass
    : public braid::impl::BraidNarrowGathersPassBase<BraidNarrowGathersPass> {
  void runOnOperation() override { narrowSlicedGathers(getOperation()); }
};
} // namespace
