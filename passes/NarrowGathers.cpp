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

/// A slice of the gather's result (offsets and sizes in the gather's
/// coordinates; `op` may read it through another slice), and how each rank
/// reads it from its own piece.
struct Reader {
  SliceOp op;
  SmallVector<int64_t> offsets, sizes;
  // From planRead: this rank's slice of its piece, and which rank's piece
  // of the gathered slices to keep (-1: all of them, the whole dim).
  SmallVector<int64_t> localOffsets, localSizes;
  int64_t owner = -1;
  int64_t ranks = 0; // the group's size: pieces along the gathered dim
};

/// Plans `reader` from each rank's piece: its range along the gathered dim
/// inside one rank's piece, or all of that dim. False otherwise, or for
/// an empty piece or a group of one (nothing to save).
bool planRead(AllGatherOp gather, Reader &reader) {
  auto pieceType = cast<RankedTensorType>(gather.getInput().getType());
  size_t d = size_t(gather.getDim());
  int64_t piece = pieceType.getDimSize(int64_t(d));
  if (piece == 0)
    return false;
  int64_t ranks =
      cast<RankedTensorType>(gather.getType()).getDimSize(int64_t(d)) / piece;
  if (ranks < 2)
    return false;
  int64_t begin = reader.offsets[d], size = reader.sizes[d];
  int64_t owner = begin / piece;
  bool inOnePiece = size > 0 && (begin + size - 1) / piece == owner;
  bool wholeDim = begin == 0 && size == piece * ranks;
  if (!inOnePiece && !wholeDim)
    return false;
  reader.localOffsets = reader.offsets;
  reader.localSizes = reader.sizes;
  if (inOnePiece) {
    reader.localOffsets[d] = begin - owner * piece;
    reader.owner = owner;
  } else {
    reader.localSizes[d] = piece;
    reader.owner = -1;
  }
  reader.ranks = ranks;
  return true;
}

/// The planned `reader`: each rank's slice, gathered, and the owner's.
Value buildRead(AllGatherOp gather, Reader reader) {
  auto pieceType = cast<RankedTensorType>(gather.getInput().getType());
  auto outType = cast<RankedTensorType>(reader.op.getType());
  size_t d = size_t(gather.getDim());
  OpBuilder b(reader.op);
  Location loc = reader.op.getLoc();
  Type element = pieceType.getElementType();
  Value mine = SliceOp::create(
      b, loc, RankedTensorType::get(reader.localSizes, element),
      gather.getInput(), reader.localOffsets, reader.localSizes);
  SmallVector<int64_t> gatheredShape(reader.localSizes);
  gatheredShape[d] *= reader.ranks;
  Value gathered =
      AllGatherOp::create(b, loc, RankedTensorType::get(gatheredShape, element),
                          mine, gather.getGroupAttr(), gather.getDimAttr());
  if (reader.owner < 0)
    return gathered;
  SmallVector<int64_t> pick(outType.getRank(), 0);
  pick[d] = reader.owner * reader.sizes[d];
  return SliceOp::create(b, loc, outType, gathered, pick, outType.getShape());
}

/// The readers of `gather` as slices each rank can read from its piece:
/// its slices, or for a slice that cannot (the one dropping sequence
/// parallelism's pad rows), that slice's own slices. Empty when any reader
/// is something else: then the whole gather stays, and narrow gathers
/// beside it would only add collectives.
SmallVector<Reader, 2> plannedReaders(AllGatherOp gather,
                                      SmallVector<SliceOp> &throughs) {
  SmallVector<Reader, 2> readers;
  for (Operation *user : gather->getUsers()) {
    // (A slice has one operand: each appears here once.)
    auto slice = dyn_cast<SliceOp>(user);
    if (!slice)
      return {};
    Reader direct{slice, SmallVector<int64_t>(slice.getOffsets()),
                  SmallVector<int64_t>(slice.getSizes())};
    if (planRead(gather, direct)) {
      readers.push_back(direct);
      continue;
    }
    if (slice->use_empty())
      return {};
    for (Operation *inner : slice->getUsers()) {
      auto innerSlice = dyn_cast<SliceOp>(inner);
      if (!innerSlice)
        return {};
      Reader composed{innerSlice, SmallVector<int64_t>(innerSlice.getOffsets()),
                      SmallVector<int64_t>(innerSlice.getSizes())};
      for (auto [o, base] : llvm::zip_equal(composed.offsets, direct.offsets))
        o += base;
      if (!planRead(gather, composed))
        return {};
      readers.push_back(composed);
    }
    throughs.push_back(slice);
  }
  return readers;
}

} // namespace

void mlir::braid::narrowSlicedGathers(Operation *root) {
  SmallVector<AllGatherOp> gathers;
  root->walk([&](AllGatherOp g) { gathers.push_back(g); });
  for (AllGatherOp gather : gathers) {
    // Read by nothing: every rank skips it alike (braid-decompose leaves
    // the final gathers of all chunks but the one the last-token slice
    // reads).
    if (gather->use_empty()) {
      gather->erase();
      continue;
    }
    SmallVector<SliceOp> throughs;
    SmallVector<Reader, 2> readers = plannedReaders(gather, throughs);
    if (readers.empty())
      continue;
    // Only where the narrow gathers together move less than the one they
    // replace.
    int64_t kept = 0;
    for (const Reader &r : readers)
      kept += ShapedType::getNumElements(r.localSizes);
    if (kept >=
        cast<RankedTensorType>(gather.getInput().getType()).getNumElements())
      continue;
    for (Reader &r : readers) {
      Value narrow = buildRead(gather, r);
      r.op.getResult().replaceAllUsesWith(narrow);
      r.op->erase();
    }
    for (SliceOp through : throughs)
      through->erase();
    gather->erase();
  }
}

namespace {
struct BraidNarrowGathersPass
    : public braid::impl::BraidNarrowGathersPassBase<BraidNarrowGathersPass> {
  void runOnOperation() override { narrowSlicedGathers(getOperation()); }
};
} // namespace
