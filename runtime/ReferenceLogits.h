//===- ReferenceLogits.h - Logits files to check a run against --*- C++ -*-===//
//
// `braid-run --dump-outputs FILE` writes, and `--check-against FILE` reads,
// a safetensors file of logits (a "golden" file, e.g. from Hugging Face):
//
//   stepK.logits  [B, T, V'] F32 (BF16 and F16 are read too). K = 0 is the
//                 prefill, K >= 1 decode step K. T is the plan's number of
//                 logit positions for that step: 1, or the prompt length
//                 for a prefill imported with --prefill-all-logits.
//   columns       optional, [V'] I32 or I64: strictly increasing vocabulary
//                 ids < V. The logits then hold only these columns and are
//                 compared on them alone; without it V' must equal V.
//   input_ids     optional, [B, S] I32 or I64: the prompt the logits belong
//                 to. When present it must equal the run's prompt (a golden
//                 file used with another prompt is an error, not a
//                 meaningless mismatch).
//
// Any other tensor name is an error: a misspelt step would otherwise be
// skipped in silence. The run compares every stepK.logits with K <= the
// steps it ran; a step it ran that the file lacks is an error (run fewer
// --steps); steps the file holds beyond the run are reported, not compared.
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_RUNTIME_REFERENCELOGITS_H
#define BRAID_RUNTIME_REFERENCELOGITS_H

#include "runtime/Generation.h"
#include "runtime/HostTensor.h"
#include "runtime/Status.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace braid::rt {

/// A validated reference logits file, read whole.
struct ReferenceLogits {
  struct Step {
    Shape shape; // [B, T, V']
    std::vector<float> values;
  };
  std::string path;
  std::map<int, Step> steps; // K -> stepK.logits
  std::optional<std::vector<int64_t>> columns;
  std::optional<std::vector<int64_t>> inputIds;
  Shape inputIdsShape; // [B, S] when inputIds is set
};

/// Reads and checks `path` on its own (names, dtypes, ranks, columns
/// strictly increasing and >= 0, one V' for every step); what depends on
/// the plan is checked by compareWithReference. Errors name the file and
/// the tensor.
Expected<ReferenceLogits> readReferenceLogits(const std::string &path);

/// Writes a run's logits as such a file: input_ids (I64 [B, S], the
/// prompt) and every step's logits (F32 [B, T, V]), as --dump-outputs does.
Status writeLogitsFile(const std::string &path, const GenerationShape &shape,
                       const std::vector<StepRecord> &steps);

/// One logit outside the tolerance.
struct LogitMismatch {
  int step = 0;                                // 0 = prefill
  int64_t batch = 0, position = 0, column = 0; // column: vocabulary id
  float got = 0, want = 0;                     // the run's, the file's
};

struct StepCheck {
  int step = 0;
  Comparison comparison;
  double maxAbsLogit = 0; // of the run's compared logits
  /// Without `columns`: whether each sequence's greedy token (argmax of
  /// the last position) is the same in the run and the file.
  std::optional<bool> sameGreedyTokens;
};

struct ReferenceCheck {
  std::vector<StepCheck> steps; // every step compared, in order
  std::vector<int> notRun;      // steps the file holds beyond the run
  std::vector<LogitMismatch> firstMismatches; // at most maxListed
  int64_t mismatches = 0;
  int64_t columns = 0; // compared per logits row
};

/// max |logit| over the file's steps that a run of `stepsRun` steps
/// (prefill included) compares: the tolerance's scale.
double referenceScale(const ReferenceLogits &ref, size_t stepsRun);

/// What can be checked before a run of `decodeSteps` decode steps on
/// `prompt` (B x S ids): input_ids equal to the prompt, columns < V, a
/// stepK.logits for every step of the run, each with B rows and V' columns.
/// Errors name the file and say what to change.
Status checkReferenceCovers(const ReferenceLogits &ref,
                            const GenerationShape &shape,
                            const std::vector<int64_t> &prompt,
                            int decodeSteps);

/// checkReferenceCovers for the run `steps` of a plan with `shape`, then
/// each step's logit positions (T), then every element: run value a, file
/// value b, a mismatch when not |a - b| <= atol + rtol * |b| (NaN never
/// matches).
Expected<ReferenceCheck>
compareWithReference(const ReferenceLogits &ref, const GenerationShape &shape,
                     const std::vector<StepRecord> &steps, double atol,
                     double rtol, size_t maxListed = 10);

/// What `--check-against PATH` names, by content: a plan (FlatBuffers
/// identifier "BRPL" at bytes 4..7) or a safetensors logits file (8-byte
/// header length that fits the file, then '{'). Anything else is an error.
enum class CheckFileKind { Plan, Logits };
Expected<CheckFileKind> checkFileKind(const std::string &path);

} // namespace braid::rt

#endif // BRAID_RUNTIME_REFERENCELOGITS_H
