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
// reading one of them is an error. Unknown dtype strings fail open().
//
// Checkpoint name resolution in loadCheckpointParameters, for plan
// parameter `name`, first match wins:
//   1. `name` itself;
//   2. "transformer." + name (GPT-2 checkpoints saved from GPT2LMHeadModel:
//      "transformer.wte.weight" for "wte.weight", "transformer.h.0.ln_1.weight"
//      for "h.0.ln_1.weight");
//   3. for "lm_head.weight" only: "model.embed_tokens.weight" (HF's
//      tie_word_embeddings, where the head is not saved separately).
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_RUNTIME_SAFETENSORS_H
#define BRAID_RUNTIME_SAFETENSORS_H

#include "runtime/HostTensor.h"
#include "runtime/Status.h"

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

  const std::string &path() const { return path_; }
  bool contains(const std::string &name) const;
  /// Tensor names, sorted.
  std::vector<std::string> names() const;
  /// The whole tensor `name` as fp32; it must have shape `expectedFullShape`.
  Expected<std::vector<float>> readFloats(const std::string &name,
                                          const Shape &expectedFullShape) const;

private:
  struct Mapping;
  struct Entry {
    std::string dtypeName; // as in the header ("BF16")
    bool readable = false; // BF16, F16 or F32
    DType dtype = DType::F32;
    Shape shape;
    uint64_t begin = 0, end = 0; // absolute offsets into the file
  };
  SafetensorsFile() = default;

  std::string path_;
  std::shared_ptr<const Mapping> map_;
  std::map<std::string, Entry> entries_;
};

/// Fills every plan parameter of `rank` (world rank `worldRank`) from `file`:
/// the full tensor is read, cut with the parameter's shard rule
/// (shardSpecFor + sliceForRank, padding included) and stored in the
/// parameter's dtype. Names resolve as described at the top of this file.
/// Errors name the parameter; parameters before the failing one are already
/// replaced, so discard the interpreter on error.
Status loadCheckpointParameters(Interpreter &rank, const LoadedPlan &plan,
                                int worldRank, const SafetensorsFile &file);

/// Receives one parameter's local slice (for any backend).
using ParameterSink =
    std::function<Status(const std::string &name, HostTensor local)>;
/// The same, handing each slice to `sink` (e.g. a GPU rank's upload).
Status loadCheckpointParameters(const ParameterSink &sink,
                                const LoadedPlan &plan, int worldRank,
                                const SafetensorsFile &file);

/// Writes `tensors` in order as a safetensors file (header padded with
/// spaces to a multiple of 8 bytes, as HF does). Names must be unique.
Status writeSafetensors(
    const std::string &path,
    const std::vector<std::pair<std::string, HostTensor>> &tensors);

} // namespace braid::rt

#endif // BRAID_RUNTIME_SAFETENSORS_H
