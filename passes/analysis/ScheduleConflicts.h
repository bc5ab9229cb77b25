//===- ScheduleConflicts.h - Schedule conflicts as errors -------*- C++ -*-===//
//
// One wording for a conflict of runtime/ScheduleCheck.h found in a function
// of IR: braid-verify-schedule reports every conflict with it, and
// braid-insert-events the ones no event can repair (a clobber, an overlap,
// an access to a collective's bytes while it is in flight, collectives of
// two communicators), so both passes name the same cause.
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_PASSES_ANALYSIS_SCHEDULECONFLICTS_H
#define BRAID_PASSES_ANALYSIS_SCHEDULECONFLICTS_H

#include "passes/analysis/ScheduleAnalysis.h"

namespace mlir::braid {

/// Emits the error for conflict `c` of `s` at its second op, with notes at
/// the other ops involved; returned so the caller can add notes.
InFlightDiagnostic emitScheduleConflict(const FunctionSchedule &s,
                                        const ::braid::sched::Conflict &c);

} // namespace mlir::braid

#endif // BRAID_PASSES_ANALYSIS_SCHEDULECONFLICTS_H
