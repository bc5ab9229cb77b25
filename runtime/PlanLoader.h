//===- PlanLoader.h - Load and verify a FlatBuffers plan --------*- C++ -*-===//
//
// Loading runs the FlatBuffers Verifier first (so no later read can go out
// of bounds) and then the semantic checks the runtimes rely on: identifier
// and version, references in range, every buffer inside the arena, every
// operand defined before use, every event recorded before it is waited, and
// shapes consistent with their buffers. A plan that loads never makes the
// interpreter read outside its own storage.
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_RUNTIME_PLANLOADER_H
#define BRAID_RUNTIME_PLANLOADER_H

#include "runtime/GroupLayout.h"
#include "runtime/HostTensor.h"
#include "runtime/Status.h"
#include "runtime/plan_generated.h"

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace braid::rt {

/// Bumped whenever plan.fbs changes meaning; what the exporter writes.
constexpr uint32_t kPlanFormatVersion = 3;
/// The oldest version this runtime still reads: versions 2 and 3 only
/// added fields (scaled RoPE and sliding windows; sharded outputs) an older
/// plan cannot hold.
constexpr uint32_t kOldestPlanFormatVersion = 1;

struct LoadOptions;

/// A verified plan; owns its bytes and is cheap to copy (shared).
class LoadedPlan {
public:
  const plan::Plan &root() const { return *root_; }
  const std::vector<uint8_t> &bytes() const { return *bytes_; }
  /// Index in root().functions(), or -1.
  int functionIndex(std::string_view name) const;
  const plan::Function *function(std::string_view name) const;

private:
  friend Expected<LoadedPlan> loadPlan(std::vector<uint8_t> bytes,
                                       const LoadOptions &options);
  std::shared_ptr<const std::vector<uint8_t>> bytes_;
  const plan::Plan *root_ = nullptr;
};

struct LoadOptions {
  /// Refuse a plan whose cross-stream accesses, arena reuse or collective
  /// order are not ordered by its streams, events and waits (the plan-level
  /// twin of braid-verify-schedule). Off only for tests that must run a
  /// deliberately unsafe plan (e.g. to show what the strict interpreter
  /// does with it).
  bool checkSchedule = true;
};

/// Verifies and takes ownership of a serialized plan.
Expected<LoadedPlan> loadPlan(std::vector<uint8_t> bytes,
                              const LoadOptions &options = {});
/// The schedule check loadPlan runs unless LoadOptions::checkSchedule is
/// off, for a plan loaded without it (the exporter checks the structure
/// and, when asked, the schedule, with one load).
Status checkPlanSchedule(const LoadedPlan &plan);
/// Reads `path` and loads it; errors name the file. Anything but a
/// regular file (a directory, a FIFO, a device) is refused before it is
/// opened.
Expected<LoadedPlan> loadPlanFile(const std::string &path,
                                  const LoadOptions &options = {});

/// An open read-only descriptor of regular file `path` and its size, for the
/// caller to close: a directory, FIFO, device or socket is refused by its
/// type before it is opened, so nothing blocks. `what` ("plan",
/// "checkpoint") starts the error messages.
struct RegularFile {
  int fd = -1;
  uint64_t size = 0;
};
Expected<RegularFile> openRegularFile(const std::string &path,
                                      const char *what);

/// The bytes of regular file `path` (at most `maxBytes`): a directory, FIFO,
/// device or socket is refused by its type before it is opened, so nothing
/// blocks. `what` ("plan") starts the error messages.
Expected<std::vector<uint8_t>>
readRegularFile(const std::string &path, const char *what, uint64_t maxBytes);

/// The semantic checks alone, on an already Verifier-checked plan.
Status checkPlanSemantics(const plan::Plan &plan);

/// Where Plan.parameter_packs put the parameters: each pack is one buffer
/// holding its pieces' local slices end to end (row-major concatenation
/// along dim 0), and a piece lives inside it, so reading the pack copies
/// nothing and loading a piece by name fills the pack.
struct ParameterPacking {
  struct Pack {
    Shape shape; // the pieces' local shapes stacked on dim 0
    DType dtype = DType::F32;
    int64_t bytes = 0;
  };
  struct Place {
    int pack = -1;      // -1: a parameter stored on its own
    int64_t offset = 0; // byte offset of the piece in its pack
  };
  std::vector<Pack> packs;   // by index in Plan.parameter_packs
  std::vector<Place> places; // by index in Plan.parameters
};
/// The packing of a plan that passed checkPlanSemantics.
ParameterPacking parameterPacking(const plan::Plan &plan);

/// A plan tensor's shape (empty: a scalar).
Shape tensorShape(const plan::Tensor &t);

/// Position of world rank `worldRank` in plan group `group`.
GroupPosition groupPosition(const plan::Plan &plan, int group, int worldRank);

/// The first vocabulary id that embedding op `op`'s table (shape `table`)
/// holds on world rank `worldRank`: rankInGroup * V when the op is
/// vocab-sharded (vocab_group >= 0), else 0.
int64_t embeddingVocabStart(const plan::Plan &plan, const plan::Op &op,
                            int worldRank, const std::vector<int64_t> &table);

const char *opcodeName(plan::OpCode opcode);
/// "sum", "max", "min" or "prod": as the IR and --print-plan spell it.
const char *reduceName(plan::ReduceKind kind);
/// braid.activation's kind as the IR spells it ("relu", "quick_gelu", ...).
const char *activationKindName(plan::ActivationKind kind);

/// A function input matched to the tensor it fills.
struct BoundInput {
  int tensor = -1;
  const HostTensor *value = nullptr;
};
/// Matches `inputs` to `f`'s input bindings by name, as every backend must
/// before a step: each binding present, with the tensor's dtype, shape and
/// byte size, and no input the function does not take. Errors name the
/// function and the input.
Expected<std::vector<BoundInput>>
bindInputs(const plan::Function &f,
           const std::map<std::string, HostTensor> &inputs);
/// The synchronous opcode an async start (all_reduce_start, ...) runs;
/// every other opcode is returned as is.
plan::OpCode syncOpcode(plan::OpCode opcode);
/// A collective (all_reduce, ..., send, recv), sync or the start of an
/// async one.
bool isCollectiveOpcode(plan::OpCode opcode);
/// The start of an async collective.
inline bool isAsyncStartOpcode(plan::OpCode opcode) {
  return syncOpcode(opcode) != opcode;
}

} // namespace braid::rt

#endif // BRAID_RUNTIME_PLANLOADER_H
