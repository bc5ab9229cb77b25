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

#include "llvm/Support/Error.h"

namespace braid {

/// The positional config.json (default: the embedded tiny LLaMA), parsed.
llvm::Expected<ModelConfig> modelConfigFromCommandLine();

/// --tp, --batch, --seq, --max-seq, --dtype, --keep-logits-sharded,
/// --prefill-all-logits.
ImportOptions importOptionsFromCommandLine();

} // namespace braid

#endif // BRAID_FRONTEND_IMPORTCOMMANDLINE_H
