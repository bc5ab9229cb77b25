//===- PlanText.h - Readable dump of a plan ---------------------*- C++ -*-===//
//
// One line per group, parameter, parameter pack, state slot, tensor,
// binding and op, in a stable format that lit tests FileCheck
// (`braid-translate --plan-to-text`, `braid-run --print-plan`). Only the
// attributes an opcode reads are shown.
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_RUNTIME_PLANTEXT_H
#define BRAID_RUNTIME_PLANTEXT_H

#include "runtime/plan_generated.h"

#include <ostream>

namespace braid::rt {

/// Prints a plan that passed the loader.
void printPlan(std::ostream &os, const plan::Plan &plan);

} // namespace braid::rt

#endif // BRAID_RUNTIME_PLANTEXT_H
