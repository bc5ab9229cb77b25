//===- InitAll.h - one registration shared by every braid tool -*- C++ -*-===//
#ifndef BRAID_PASSES_INITALL_H
#define BRAID_PASSES_INITALL_H

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace braid {
/// Dialects every braid tool understands: braid, func, arith.
void registerAllDialects(mlir::DialectRegistry &registry);
/// Every braid pass and pipeline.
void registerAllPasses();
} // namespace braid

#endif // BRAID_PASSES_INITALL_H
