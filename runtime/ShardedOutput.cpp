//===- ShardedOutput.cpp - Outputs each rank holds a block of -------------===//
#include "runtime/ShardedOutput.h"
#include "runtime/GroupLayout.h"
#include "runtime/PlanLoader.h"

#include <algorithm>
#include <cstring>

using namespace braid::rt;
namespace plan = braid::plan;

const plan::Binding *braid::rt::outputBinding(const plan::Function &f,
                                              std::string_view name) {
  if (f.outputs())
    for (const plan::Binding *b : *f.outputs())
      if (b->name()->string_view() == name)
        return b;
  return nullptr;
}

static Shape bindingShape(const plan::Function &f, const plan::Binding &b) {
  return tensorShape(*f.tensors()->Get(unsigned(b.tensor())));
}

Shape braid::rt::wholeShape(const plan::Function &f, const plan::Binding &b) {
  Shape shape = bindingShape(f, b);
  if (b.shard_group() != -1)
    shape[size_t(b.shard_dim())] = b.full_size();
  return shape;
}

Expected<HostTensor>
braid::rt::gatherOutput(const plan::Plan &plan, const plan::Function &f,
                        const plan::Binding &b, int worldRank,
                        const std::function<const HostTensor *(int)> &blockOf) {
  Shape blockShape = bindingShape(f, b);
  plan::DType dtype = f.tensors()->Get(unsigned(b.tensor()))->dtype();
  std::string what =
      "output '" + b.name()->str() + "' of '" + f.name()->str() + "'";
  auto block = [&](int rank) -> Expected<const HostTensor *> {
    const HostTensor *t = blockOf(rank);
    if (!t)
      return errorf(what, ": rank ", rank, "'s block is missing");
    if (t->dtype != dtype || t->shape != blockShape)
      return errorf(what, ": rank ", rank, " returned ", dtypeName(t->dtype),
                    " ", formatShape(t->shape), ", not the plan's ",
                    dtypeName(dtype), " ", formatShape(blockShape));
    return t;
  };
  if (b.shard_group() == -1) {
    auto own = block(worldRank);
    if (!own)
      return own.status();
    return **own;
  }
  const plan::DeviceGroup *g = plan.groups()->Get(unsigned(b.shard_group()));
  GroupPosition pos = groupPosition(b.shard_group(), g->size(), g->stride(),
                                    plan.world_size(), worldRank);
  size_t dim = size_t(b.shard_dim());
  // Rows of `inner` bytes: `outer` of them per block, `rows` per block
  // along the sharded dim.
  int64_t outer = 1, inner = int64_t(dtypeSize(dtype));
  for (size_t d = 0; d < dim; ++d)
    outer *= blockShape[d];
  for (size_t d = dim + 1; d < blockShape.size(); ++d)
    inner *= blockShape[d];
  int64_t rows = blockShape[dim], full = b.full_size();
  HostTensor whole(dtype, wholeShape(f, b));
  for (int j = 0; j < pos.size && j * rows < full; ++j) {
    auto member = block(pos.memberWorldRank(j));
    if (!member)
      return member.status();
    int64_t take = std::min(rows, full - j * rows);
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(whole.bytes.data() + (o * full + j * rows) * inner,
                  (*member)->bytes.data() + o * rows * inner,
                  size_t(take * inner));
  }
  return whole;
}

Status
braid::rt::gatherOutputs(const plan::Plan &plan, const plan::Function &f,
                         std::string_view name, const std::vector<int> &ranks,
                         std::vector<std::map<std::string, HostTensor>> &outs,
                         const std::vector<HostTensor> &otherProcesses) {
  const plan::Binding *b = outputBinding(f, name);
  if (!b || b->shard_group() == -1)
    return Status::ok();
  if (ranks.size() != outs.size())
    return errorf("internal: ", outs.size(), " ranks' outputs for ",
                  ranks.size(), " ranks");
  std::string key(name);
  auto blockOf = [&](int rank) -> const HostTensor * {
    for (size_t i = 0; i < ranks.size(); ++i)
      if (ranks[i] == rank) {
        auto it = outs[i].find(key);
        return it == outs[i].end() ? nullptr : &it->second;
      }
    return rank >= 0 && size_t(rank) < otherProcesses.size()
               ? &otherProcesses[size_t(rank)]
               : nullptr;
  };
  std::vector<HostTensor> whole;
  for (int rank : ranks) {
    auto w = gatherOutput(plan, f, *b, rank, blockOf);
    if (!w)
      return w.status();
    whole.push_back(w.take());
  }
  for (size_t i = 0; i < ranks.size(); ++i)
    outs[i][key] = std::move(whole[i]);
  return Status::ok();
}

Expected<std::vector<HostTensor>>
braid::rt::allGatherBlocks(Bootstrap &processes, const HostTensor &mine) {
  auto all =
      processes.allGather(std::string(mine.bytes.begin(), mine.bytes.end()));
  if (!all)
    return all.status();
  std::vector<HostTensor> blocks;
  blocks.reserve(all->size());
  for (size_t r = 0; r < all->size(); ++r) {
    HostTensor t(mine.dtype, mine.shape);
    const std::string &got = (*all)[r];
    if (got.size() != t.bytes.size())
      return errorf("process ", r, " sent ", got.size(), " bytes, not the ",
                    t.bytes.size(), " of a ", dtypeName(mine.dtype), " ",
                    formatShape(mine.shape), " block");
    std::memcpy(t.bytes.data(), got.data(), got.size());
    blocks.push_back(std::move(t));
  }
  return blocks;
}
