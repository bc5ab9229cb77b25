//===- braid-translate.cpp - braid IR <-> plan translations ---------------===//
#include "translate/PlanExport.h"

#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"

int main(int argc, char **argv) {
  braid::registerPlanTranslations();
  return mlir::failed(
             mlir::mlirTranslateMain(argc, argv, "braid plan translator\n"))
             ? 1
             : 0;
}
