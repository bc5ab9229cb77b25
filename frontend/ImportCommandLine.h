//===- ImportCommandLine.h - Shared importer flags ---------------*- C++ -*-===//
//
// The model and import flags of braid-import and braid-compile, defined once:
// a tool that calls these functions gets the options registered.
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_FRONTEND_IMPORTCOMMANDLINE_H
#define BRAID_FRONTEND_IMPORTCOMMANDLINE_H

#include "frontend/Importer.h"
#include "frontend/ModelConfig.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Error.h"

namespace braid {

/// The positional config.json (default: the embedded tiny LLaMA), parsed.
llvm::Expected<ModelConfig> modelConfigFromCommandLine();

/// --tp, --batch, --seq, --max-seq, --dtype, --keep-logits-sharded,
/// --prefill-all-logits, --prefill-buckets (an error names a bad bucket).
llvm::Expected<ImportOptions> importOptionsFromCommandLine();

/// Hides from --help every option outside the model import options and
/// `toolCategories` (LLVM's backend flags that libLLVM registers, and
/// MLIR's, unless `showMlirOptions`: those named mlir-*, e.g. the pass
/// manager's IR printing). Hidden options still parse.
void showOnlyBraidOptionsInHelp(
    llvm::ArrayRef<const llvm::cl::OptionCategory *> toolCategories,
    bool showMlirOptions);

} // namespace braid

#endif // BRAID_FRONTEND_IMPORTCOMMANDLINE_H
