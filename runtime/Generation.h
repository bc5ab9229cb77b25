//===- Generation.h - Prefill + greedy decode over a plan -------*- C++ -*-===//
//
// The loop braid-run drives: one `prefill` step on a prompt, then decode
// steps that feed back each sequence's greedy (argmax) next token at the
// next position. Backend-neutral: a `StepFn` runs one function on every rank
// and returns rank 0's outputs. Comparing two plans (`--check-against`)
// replays the first run's tokens into the second (teacher forcing), so a
// near-tie argmax cannot make the two runs diverge and hide a real
// numerical difference.
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_RUNTIME_GENERATION_H
#define BRAID_RUNTIME_GENERATION_H

#include "runtime/HostTensor.h"
#include "runtime/PlanLoader.h"
#include "runtime/Status.h"

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace braid::rt {

/// One prefill shape bucket of a plan (braid-import --prefill-buckets): the
/// function `prefill_<tokens>`, run on prompts of at most `tokens` tokens
/// padded at the end; `logit_rows` [B, 1] names the row whose logits each
/// sequence returns (absent when the bucket returns every position).
struct PrefillBucket {
  int64_t tokens = 0;
  std::string function;
  bool logitRows = false;
  plan::DType logitRowsType = plan::DType::I32;
};

/// Shapes the plan's entry functions fix.
struct GenerationShape {
  /// Sequences this run generates: the plan's batch, or fewer
  /// (shapeForSequences); the plan's steps run planBatch (prefill) and
  /// decodeBatch (decode) of them, the rest padding.
  int64_t batch = 0;
  int64_t planBatch = 0;
  int64_t promptLength = 0; // prompt tokens per sequence of this run
  int64_t vocab = 0; // last dim of the logits output (gathered if sharded)
  plan::DType idsType = plan::DType::I32;
  plan::DType positionsType = plan::DType::I32;
  /// The prefill function this run uses and the tokens it takes per
  /// sequence (>= promptLength: the prompt is padded at the end).
  std::string prefillFunction = "prefill";
  int64_t prefillTokens = 0;
  bool logitRows = false;
  plan::DType logitRowsType = plan::DType::I32;
  /// The plan's buckets, by size; empty for a plan with one `prefill`.
  std::vector<PrefillBucket> buckets;
  /// The decode function this run uses and the sequences it runs (>=
  /// batch): `decode` (planBatch), or a `decode_<b>` batch bucket.
  std::string decodeFunction = "decode";
  int64_t decodeBatch = 0;
  /// The plan's decode batch buckets `decode_<b>` (b < planBatch), by size.
  std::vector<std::pair<int64_t, std::string>> decodeBuckets;
  /// Positions the decode's KV caches hold (dim 1 of its attentions' k
  /// caches, the least of them; braid-compile --max-seq); 0: none found.
  int64_t cacheRows = 0;
};

/// Checks the plan has `decode` and either `prefill` or one or more
/// `prefill_<S>` buckets, with `input_ids`/`positions` inputs ([B, S] and
/// [B, 1]) and a `logits` output ([B, *, V]), none of B, S, V and the logit
/// positions 0, and ids in [0, V) that fit input_ids' dtype. With buckets,
/// the prompt length defaults to the largest (shapeForPrompt picks).
Expected<GenerationShape> generationShape(const plan::Plan &plan);

/// `shape` for a prompt of `promptIds` ids (batch x length): with buckets,
/// the smallest bucket that holds the length; an error names the buckets
/// when none does. A plan with one `prefill` is returned unchanged (generate
/// checks the prompt against it).
Expected<GenerationShape> shapeForPrompt(const GenerationShape &shape,
                                         size_t promptIds);

/// `shape` for `sequences` (1..planBatch) sequences: decode runs in the
/// smallest decode batch bucket that holds them (or `decode`); prefill runs
/// the plan's batch, the extra sequences padding. Call before
/// shapeForPrompt (the prompt then holds `sequences` x length ids).
Expected<GenerationShape> shapeForSequences(const GenerationShape &shape,
                                            int64_t sequences);

/// Both of the above, as braid-run applies them: `sequences` 0 keeps the
/// plan's batch; `promptIds` 0 keeps the prompt length (a synthetic one).
Expected<GenerationShape> shapeForRun(const GenerationShape &shape,
                                      int64_t sequences, size_t promptIds);

/// Deterministic prompt: B x S ids in [0, vocab) from `seed`.
std::vector<int64_t> syntheticPrompt(const GenerationShape &shape,
                                     uint64_t seed);

using StepInputs = std::map<std::string, HostTensor>;

/// One step's inputs: `ids` (rows x tokens, row-major; rows = ids / tokens)
/// at positions [start, start + tokens) of every sequence.
StepInputs stepInputs(const GenerationShape &shape,
                      const std::vector<int64_t> &ids, int64_t tokens,
                      int64_t start);

/// The inputs of one decode step of `shape.decodeFunction`: `tokens` (one
/// per generated sequence) padded with id 0 to decodeBatch sequences, at
/// position `position`.
StepInputs decodeInputs(const GenerationShape &shape,
                        const std::vector<int64_t> &tokens, int64_t position);
/// Runs `function` on every rank; returns rank 0's outputs, with logits a
/// plan leaves sharded gathered whole (generationShape's vocab is the
/// whole vocabulary).
using StepFn = std::function<Expected<std::map<std::string, HostTensor>>(
    const std::string &function, const StepInputs &inputs)>;

struct StepRecord {
  std::string function;
  std::vector<int64_t> inputIds;  // [B * tokens of this step]
  std::vector<float> logits;      // rank 0's logits, last position, [B, V]
  /// Every logit position the step returned, [B, positions, V]: positions
  /// is 1, or the prompt length for a prefill that returns all logits.
  std::vector<float> allLogits;
  int64_t positions = 1;
  std::vector<int64_t> nextToken; // argmax per sequence
  double milliseconds = 0;        // wall time of the step
};

struct GenerationOptions {
  std::vector<int64_t> prompt; // B x S ids
  int decodeSteps = 0;
  /// When set, decode step i feeds forcedTokens[i] (B ids) instead of the
  /// argmax of the previous step.
  std::vector<std::vector<int64_t>> forcedTokens;
  /// A step whose logits hold a NaN or an infinity fails (naming the step
  /// and the first such logit) unless this is set: a greedy argmax over
  /// NaN picks token 0 and the run would look fine.
  bool allowNonFinite = false;
  /// Optional: asked, on such a failure, why; gets the steps so far, the
  /// failing one last (only its function and inputIds are set) and returns
  /// text appended to the error (e.g. the first op whose output is not
  /// finite, from a replay on the CPU interpreter), or "".
  std::function<std::string(const std::vector<StepRecord> &steps)>
      explainNonFinite;
};

/// What generate refuses before its first step (the prompt's length and
/// ids, forced tokens, steps past the positions or the KV cache): a runner
/// calls it before it allocates and fills the weights, so a wrong prompt
/// fails at once, not after set-up.
Status checkGeneration(const GenerationShape &shape,
                       const GenerationOptions &options);

Expected<std::vector<StepRecord>> generate(const GenerationShape &shape,
                                           const GenerationOptions &options,
                                           const StepFn &step);

/// Token ids in `text`, separated by whitespace and/or commas (a prompt
/// file). Errors name `source`, the item and its position.
Expected<std::vector<int64_t>> parseTokenList(std::string_view text,
                                              const std::string &source);

/// Teacher-forced decode inputs from a list laid out like the prompt:
/// sequence-major, `batch` x N ids (sequence 0's N tokens, then sequence
/// 1's, ...). Decode step k (1-based) feeds token k of every sequence, so
/// the result holds N steps of `batch` ids each. The list must hold a
/// whole, non-zero number of tokens per sequence.
Expected<std::vector<std::vector<int64_t>>>
forcedTokensByStep(const std::vector<int64_t> &list, int64_t batch);

/// Largest |a - b| and whether every element satisfies
/// |a - b| <= atol + rtol * |b|.
struct Comparison {
  double maxAbsError = 0;
  double maxRelError = 0; // |a - b| / max(|b|, atol)
  int64_t mismatches = 0;
  int64_t worstIndex = -1;
};
Comparison compareValues(const std::vector<float> &a,
                         const std::vector<float> &b, double atol,
                         double rtol);

} // namespace braid::rt

#endif // BRAID_RUNTIME_GENERATION_H
