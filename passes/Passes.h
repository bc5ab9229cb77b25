//===- Passes.h - braid pass declarations ---------------------*- C++ -*-===//
#ifndef BRAID_PASSES_PASSES_H
#define BRAID_PASSES_PASSES_H

#include "dialect/BraidOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::braid {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

/// On a function braid-decompose cut: the number of token chunks (i64).
/// Informational (braid-compile --report); nothing reads it to compute.
constexpr llvm::StringLiteral kTokenChunksAttr = "braid.token_chunks";

} // namespace mlir::braid

#endif // BRAID_PASSES_PASSES_H
