//===- MlirFlags.h - MLIR's flags in braid-opt fail cleanly ----*- C++ -*-===//
//
// braid-opt exposes mlir-opt's flags, and a few of them act badly on bad
// values: --mlir-debug-counter=<malformed> calls report_fatal_error (an
// abort with a crash banner), --irdl-file=/dev/zero is read until memory
// runs out, and a --load-pass-plugin or --load-dialect-plugin that does not
// load is "ignored" with exit 0. These make each one an error naming the
// flag and a non-zero exit.
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_TOOLS_BRAID_OPT_MLIRFLAGS_H
#define BRAID_TOOLS_BRAID_OPT_MLIRFLAGS_H

#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Support/Error.h"

namespace braid {

/// Checks, after the command line is parsed and before MlirOptMain runs:
/// that every plugin given loads, and that --irdl-file is a file
/// readInputFile accepts (bounded, not a device).
llvm::Error checkMlirOptFlags(const mlir::MlirOptMainConfig &config);

/// Makes report_fatal_error (MLIR's answer to a malformed
/// --mlir-debug-counter, among others) print `tool: <reason>`, remove the
/// output file being written and exit 1, as clang does, instead of
/// aborting.
void exitCleanlyOnFatalErrors(const char *tool);

} // namespace braid

#endif // BRAID_TOOLS_BRAID_OPT_MLIRFLAGS_H
