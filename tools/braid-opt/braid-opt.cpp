//===- braid-opt.cpp - the braid pass driver ------------------------------===//
#include "passes/InitAll.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  braid::registerAllDialects(registry);
  braid::registerAllPasses();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "braid pass driver\n", registry));
}
