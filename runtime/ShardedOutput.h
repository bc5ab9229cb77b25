//===- ShardedOutput.h - Outputs each rank holds a block of -----*- C++ -*-===//
//
// A plan output may be left sharded (Binding.shard_group; braid-compile
// --keep-logits-sharded): every rank returns its block of one dim, and the
// output as a whole is the blocks of its group instance's members, in
// group-rank order, cut to the binding's full size (the rest is padding).
// Both runtimes return blocks; whoever needs the whole (braid-run's
// generation) gathers them here, with the plan's own mesh rule.
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_RUNTIME_SHARDEDOUTPUT_H
#define BRAID_RUNTIME_SHARDEDOUTPUT_H

#include "runtime/Bootstrap.h"
#include "runtime/HostTensor.h"
#include "runtime/Status.h"
#include "runtime/plan_generated.h"

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace braid::rt {

/// Function `f`'s output binding named `name`; nullptr when it has none.
const plan::Binding *outputBinding(const plan::Function &f,
                                   std::string_view name);

/// Output `b` of `f` as a whole: its tensor's shape, with the sharded dim
/// at the binding's full size.
Shape wholeShape(const plan::Function &f, const plan::Binding &b);

/// Output `b` of `f` as a whole, as world rank `worldRank` sees it: the
/// blocks `blockOf(r)` of the world ranks r of its group instance,
/// concatenated along the sharded dim in group-rank order and cut to the
/// full size. An unsharded output is `blockOf(worldRank)` itself. An error
/// names a member whose block is missing (nullptr) or is not of the
/// binding's tensor type. `plan` must have passed the loader's checks.
Expected<HostTensor>
gatherOutput(const plan::Plan &plan, const plan::Function &f,
             const plan::Binding &b, int worldRank,
             const std::function<const HostTensor *(int)> &blockOf);

/// Replaces output `name` of `f` in `outs` (the outputs of world rank
/// `ranks[i]` at i) by the whole each of those ranks sees, gathered from
/// the blocks in `outs` and, by world rank, `otherProcesses` (the blocks of
/// a multi-process run, allGatherBlocks; empty in one process). An output
/// that is not sharded, or that `f` does not have, is left as it is.
Status gatherOutputs(const plan::Plan &plan, const plan::Function &f,
                     std::string_view name, const std::vector<int> &ranks,
                     std::vector<std::map<std::string, HostTensor>> &outs,
                     const std::vector<HostTensor> &otherProcesses = {});

/// Every process's `mine` (its rank's block, of one dtype and shape on
/// every process), by process rank: a multi-process run holds one rank per
/// process. An error names a process whose block has another byte size.
/// Collective: every process calls it for the same output.
Expected<std::vector<HostTensor>> allGatherBlocks(Bootstrap &processes,
                                                  const HostTensor &mine);

} // namespace braid::rt

#endif // BRAID_RUNTIME_SHARDEDOUTPUT_H
