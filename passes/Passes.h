//===- Passes.h - braid pass declarations ---------------------*- C++ -*-===//
#ifndef BRAID_PASSES_PASSES_H
#define BRAID_PASSES_PASSES_H

#include "dialect/BraidOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::braid {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

/// A step's token inputs: its bound inputs (`braid.input`) of rank >= 2
/// whose dim 1 is the tokens per sequence (token ids and positions): the
/// `positions` input's dim 1, else the first such input's. braid-decompose
/// cuts them into chunks.
SmallVector<BlockArgument> tokenInputs(func::FuncOp func);

/// braid-decompose's `chunks` option (braid-compile --decompose): a
/// comma-separated list of counts >= 1; nullopt when it is not one.
std::optional<SmallVector<int>> parseChunkCounts(StringRef chunks);

/// On a function braid-decompose cut: the number of token chunks (i64).
/// Informational (braid-compile --report); nothing reads it to compute.
constexpr llvm::StringLiteral kTokenChunksAttr = "braid.token_chunks";

/// On a private function braid-sequence-parallel added as an alternative
/// form of another (`variants=true`): the name of that function (string).
/// braid-decompose prices each function and its variants scheduled, keeps
/// the fastest under the function's name and erases the rest.
constexpr llvm::StringLiteral kVariantOfAttr = "braid.variant_of";

} // namespace mlir::braid

#endif // BRAID_PASSES_PASSES_H
