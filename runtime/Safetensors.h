//===- Safetensors.h - Hugging Face safetensors checkpoints -----*- C++ -*-===//
//
// The format: an 8-byte little-endian header length N, N bytes of JSON
// mapping tensor names to {"dtype", "shape", "data_offsets": [begin, end]}
// (offsets relative to the data region that follows the header), then the
// data region. An optional "__metadata__" entry is ignored.
//
// open() validates the whole header up front (types, dims, offsets inside
// the data region, byte size == elements x dtype size, no overflow, no
// tensor named twice, no two tensors sharing bytes), so a file that opens
// can be read without further bounds checks. A path that is not a regular
// file (a directory, a FIFO, a device) is refused before it is opened. Reading
// converts BF16, F16 and F32 to fp32; other dtypes HF writes (F64, I64, ...)
// open, so checkpoints that carry a few integer buffers still load, but
// reading one of them as floats is an error. Unknown dtype strings fail
// open().
//
// A Checkpoint is one such file or the shards of a sharded checkpoint, as
// Hugging Face writes it: `model.safetensors.index.json` holds
//   {"metadata": {...},
//    "weight_map": {"tensor": "model-00001-of-00002.safetensors", ...}}
// with shard names relative to the index's directory. Checkpoint::open takes
//   - a safetensors file;
//   - an index: a file named `*.json`, or any file whose first byte is `{`
//     and whose 8-byte length field exceeds the file (JSON text, never a
//     valid safetensors file);
//   - a directory holding exactly one of `model.safetensors` and
//     `model.safetensors.index.json` (both is an error: a stale single file
//     next to the shards, or the reverse, must not be loaded silently).
// The index is read hostilely: at most kMaxCheckpointIndexBytes, nesting at
// most kMaxCheckpointIndexNesting, no key twice, weight_map entries are
// strings naming files inside the index's directory (no absolute path, no
// empty, `.` or `..` component), every listed tensor is in its shard, every
// shard tensor is listed and mapped to that shard. Each shard is opened
// (mapped) once; ranks read only their slices (readSlice).
// PyTorch's pickled checkpoints (`pytorch_model.bin`, its shards and
// index) are never read; the error for a directory holding only those, or
// for such a file, says so and how to convert it.
//
// Checkpoint name resolution (matchCheckpoint). Plan parameter `name` is
// read from the tensor of that name or from its other spelling, which is
//   - `name` without its first component when that is a family's base-model
//     prefix ("model.", "gpt_neox.", "transformer."): a base model's
//     checkpoint (LlamaModel, Qwen2Model, GPTNeoXModel save_pretrained)
//     holds "embed_tokens.weight" for "model.embed_tokens.weight", as
//     transformers' base_model_prefix handling loads it;
//   - otherwise "transformer." + name (GPT-2, whose parameters Braid names
//     as GPT2Model does: GPT2LMHeadModel's checkpoints hold
//     "transformer.wte.weight" for "wte.weight");
//   - none for the LM heads "lm_head.weight" and "embed_out.weight", which
//     are outside the base model.
// A checkpoint holding both spellings of one parameter is ambiguous and an
// error, and so is one that mixes them (of the parameters whose other
// spelling adds or strips the same prefix, some read under the plan's name,
// others under the other spelling). For GPT-NeoX's
// "embed_out.weight" (the Hub's name), "lm_head.weight" (transformers 5's)
// is read when the checkpoint has no "embed_out.weight". A missing
// parameter's error names every spelling tried.
// There is no fallback for "lm_head.weight": the importer reads the
// embedding as the head itself when tie_word_embeddings is true (the plan
// then has no lm_head.weight), so a plan that asks for it was compiled from
// an untied config and the checkpoint must hold it. Checkpoint tensors that
// no parameter resolves to are an error (a checkpoint for another model or
// config) unless CheckpointLoadOptions::allowUnusedWeights, except the
// buffers Hugging Face saves that no plan reads (isKnownUnusedBuffer).
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_RUNTIME_SAFETENSORS_H
#define BRAID_RUNTIME_SAFETENSORS_H

#include "runtime/HostTensor.h"
#include "runtime/Status.h"
#include "runtime/Weights.h"

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace braid::rt {

class Interpreter;
class LoadedPlan;

/// A validated, read-only mapped safetensors file. Cheap to copy (the
/// mapping is shared).
class SafetensorsFile {
public:
  /// Maps `path` and validates its header; errors name the file and, where
  /// one is at fault, the tensor.
  static Expected<SafetensorsFile> open(const std::string &path);

  /// What the header says about one tensor.
  struct TensorInfo {
    std::string dtypeName; // as in the header ("BF16")
    Shape shape;
  };

  const std::string &path() const { return path_; }
  bool contains(const std::string &name) const;
  /// Tensor `name`'s header entry, or null.
  const TensorInfo *find(const std::string &name) const;
  /// Tensor names, sorted.
  std::vector<std::string> names() const;
  /// The whole tensor `name` as fp32; it must have shape `expectedFullShape`.
  Expected<std::vector<float>> readFloats(const std::string &name,
                                          const Shape &expectedFullShape) const;
  /// One rank's slice of tensor `name` (shape `fullShape`) as fp32: the
  /// same values as sliceForRank(readFloats(name, fullShape), ...), padding
  /// zero, but only the slice's elements are read (and so only their pages
  /// of the mapping touched).
  Expected<std::vector<float>> readSlice(const std::string &name,
                                         const Shape &fullShape,
                                         const Shape &paddedShape,
                                         const ShardSpec &spec) const;
  /// The whole I32 or I64 tensor `name` of shape `expectedShape`.
  Expected<std::vector<int64_t>> readInts(const std::string &name,
                                          const Shape &expectedShape) const;

private:
  struct Mapping;
  struct Entry : TensorInfo {
    bool readable = false; // BF16, F16 or F32
    DType dtype = DType::F32;
    uint64_t begin = 0, end = 0; // absolute offsets into the file
  };
  SafetensorsFile() = default;
  Expected<const Entry *> entry(const std::string &name,
                                const Shape &expectedShape) const;
  /// entry(), and of a dtype the readers convert (BF16, F16, F32).
  Expected<const Entry *> readableEntry(const std::string &name,
                                        const Shape &expectedShape) const;

  std::string path_;
  std::shared_ptr<const Mapping> map_;
  std::map<std::string, Entry> entries_;
};

/// Bounds on a sharded checkpoint's index (real ones: tens of KB, nesting 2).
constexpr uint64_t kMaxCheckpointIndexBytes = uint64_t(16) << 20; // 16 MiB
constexpr int kMaxCheckpointIndexNesting = 64;

/// A checkpoint: one safetensors file, or the shards an index names (see
/// the top of this file). Cheap to copy (the mappings are shared).
class Checkpoint {
public:
  /// A safetensors file, an index or a model directory; errors name the
  /// path, and the shard or tensor at fault.
  static Expected<Checkpoint> open(const std::string &path);
  /// One already open file (implicit: every API taking a checkpoint takes
  /// a single file too).
  Checkpoint(SafetensorsFile file);

  /// The file or index that was opened (the index, for a directory).
  const std::string &path() const { return path_; }
  /// 1 for a single file.
  size_t numShards() const { return shards_.size(); }
  bool contains(const std::string &name) const;
  /// Tensor names over all shards, sorted.
  std::vector<std::string> names() const;
  /// The shard holding `name`, or null.
  const SafetensorsFile *shardOf(const std::string &name) const;

private:
  Checkpoint() = default;
  static Expected<Checkpoint> openIndex(const std::string &path);

  std::string path_;
  std::vector<SafetensorsFile> shards_;
  std::map<std::string, size_t> shardOf_; // tensor -> index into shards_
};

/// Buffers Hugging Face checkpoints carry that no plan reads, so an unused
/// one is no sign of a wrong checkpoint: `*rotary_emb.inv_freq` (recomputed
/// from rope_theta) and GPT-2's causal-mask buffers `h.N.attn.bias` and
/// `h.N.attn.masked_bias` (with or without the "transformer." prefix), and
/// GPT-NeoX's `gpt_neox.layers.N.attention.bias` / `.masked_bias` (with or
/// without the "gpt_neox." prefix).
bool isKnownUnusedBuffer(const std::string &name);

/// How a plan's parameters map onto a checkpoint's tensors.
struct CheckpointMatch {
  /// Per plan parameter (plan order), the checkpoint tensor it reads.
  std::vector<std::string> sources;
  /// Tensors no parameter reads, known-unused buffers left out; sorted.
  std::vector<std::string> unused;
  /// Known-unused buffers no parameter reads; sorted.
  std::vector<std::string> skipped;
};

/// Resolves every parameter's name (see the top of this file); a parameter
/// the checkpoint lacks is an error naming it. The parameter list is the
/// same on every rank, so the match is too.
Expected<CheckpointMatch> matchCheckpoint(const plan::Plan &plan,
                                          const Checkpoint &checkpoint);

/// "checkpoint 'p' holds N tensors the plan does not use: 'a', 'b', ...":
/// the first few names and the count, for the error and the warning.
std::string describeUnused(const Checkpoint &checkpoint, const plan::Plan &plan,
                           const std::vector<std::string> &unused);

struct CheckpointLoadOptions {
  /// Unused checkpoint tensors are ignored instead of an error (checkpoints
  /// carrying extra heads); matchCheckpoint lists them for a warning.
  bool allowUnusedWeights = false;
};

/// matchCheckpoint, then the unused-tensor rule: unused tensors (known
/// buffers aside) are an error naming them unless
/// options.allowUnusedWeights (then they are in the result's `unused`, for
/// the caller's warning).
Expected<CheckpointMatch> checkCheckpoint(const plan::Plan &plan,
                                          const Checkpoint &checkpoint,
                                          const CheckpointLoadOptions &options);

/// Fills every plan parameter of `rank` (world rank `worldRank`) from
/// `checkpoint`: this rank's slice is read (readSlice: the parameter's
/// shard rule, padding included) and stored in the parameter's dtype
/// (BF16, F16 and F32 tensors load into any plan dtype). Names resolve as
/// described at the top of this file. Errors name the parameter;
/// parameters before the failing one are already replaced, so discard the
/// interpreter on error.
Status loadCheckpointParameters(Interpreter &rank, const LoadedPlan &plan,
                                int worldRank, const Checkpoint &checkpoint,
                                const CheckpointLoadOptions &options = {});

/// Receives one parameter's local slice (for any backend).
using ParameterSink =
    std::function<Status(const std::string &name, HostTensor local)>;
/// The same, handing each slice to `sink` (e.g. a GPU rank's upload).
Status loadCheckpointParameters(const ParameterSink &sink,
                                const LoadedPlan &plan, int worldRank,
                                const Checkpoint &checkpoint,
                                const CheckpointLoadOptions &options = {});

/// Writes `tensors` in order as a safetensors file (header padded with
/// spaces to a multiple of 8 bytes, as HF does). Names must be unique.
Status writeSafetensors(
    const std::string &path,
    const std::vector<std::pair<std::string, HostTensor>> &tensors);

} // namespace braid::rt

#endif // BRAID_RUNTIME_SAFETENSORS_H
