//===- CompileReport.h - what the default pipeline bought -----*- C++ -*-===//
//
// `braid-compile --report`: per entry function, the step the cost model
// gives the function compiled without scheduling (serial: one stream,
// synchronous collectives, no token chunks) and as compiled, the exposed
// communication of each, overlap efficiency, the token chunks
// braid-decompose chose and the arena braid-plan-memory planned.
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_PASSES_COMPILEREPORT_H
#define BRAID_PASSES_COMPILEREPORT_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace braid {

/// `serial` is the same import compiled with scheduling off, or null when
/// there is none (a custom pipeline): the serial column is then left out.
/// Errors: an unknown target, a function of more than one block.
llvm::Error printCompileReport(llvm::raw_ostream &os, mlir::ModuleOp compiled,
                               mlir::ModuleOp serial,
                               const std::string &target);

} // namespace braid

#endif // BRAID_PASSES_COMPILEREPORT_H
