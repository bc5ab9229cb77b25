//===- braid-run.cpp - run a plan: prefill + greedy decode ----------------===//
//
// Links only the runtime (no MLIR, no LLVM): this is the binary that ships
// to the machines that run plans. Everything it does is in the runtime's
// braid-run library (runtime/cli/RunCommand.h); `braid-run --help` lists
// the options.
//
//===----------------------------------------------------------------------===//
#include "runtime/cli/RunCommand.h"

int main(int argc, char **argv) { return braid::rt::runCommand(argc, argv); }
