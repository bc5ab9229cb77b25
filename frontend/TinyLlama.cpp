//===- TinyLlama.cpp - the embedded default model config ------------------===//
#include "frontend/Importer.h"

llvm::StringRef braid::tinyLlamaConfigJson() {
  static const char json[] =
#include "frontend/TinyLlamaConfig.inc"
      ;
  return json;
}
