//===- PlanTestUtil.h - Build small plans in tests --------------*- C++ -*-===//
#ifndef BRAID_TEST_RUNTIME_PLANTESTUTIL_H
#define BRAID_TEST_RUNTIME_PLANTESTUTIL_H

#include "runtime/HostTensor.h"
#include "runtime/plan_generated.h"

#include <string>
#include <vector>

namespace braid::rt::test {

using plan::OpCode;
using plan::TensorKind;

/// Builds one function through the FlatBuffers object API, bump-allocating
/// arena buffers for activations and inputs.
class FnBuilder {
public:
  explicit FnBuilder(plan::FunctionT &fn) : fn_(fn) {}
  int tensor(Shape shape, DType dtype = DType::F32,
             TensorKind kind = TensorKind::Activation, int ref = -1);
  int input(const std::string &name, Shape shape, DType dtype = DType::F32);
  int param(int paramIndex, const plan::PlanT &plan);
  /// A PackedParameter tensor of pack `packIndex` (its pieces' local
  /// shapes stacked on dim 0, their dtype).
  int packedParam(int packIndex, const plan::PlanT &plan);
  int state(int slot, const plan::PlanT &plan);
  void output(const std::string &name, int tensor);
  plan::OpT &op(OpCode code, std::vector<int> operands,
                std::vector<int> results);
  plan::FunctionT &fn() { return fn_; }

private:
  plan::FunctionT &fn_;
};

class PlanBuilder {
public:
  explicit PlanBuilder(int worldSize = 1);
  int group(const std::string &name, int size, int stride = 1);
  /// `shardDim` < 0: replicated.
  int param(const std::string &name, Shape full, Shape local,
            DType dtype = DType::F32, int shardDim = -1, int group = -1,
            int shards = 0, int blocks = 1);
  int stateSlot(const std::string &name, Shape shape, DType dtype = DType::F32);
  /// A parameter pack of `pieces` (indices of parameters, in order).
  int pack(std::vector<int> pieces);
  FnBuilder function(const std::string &name);
  plan::PlanT &plan() { return plan_; }
  std::vector<uint8_t> finish() const;

private:
  plan::PlanT plan_;
};

/// n values of a sine wave of amplitude 2 (test inputs that differ per
/// element and per phase).
std::vector<float> wave(int64_t n, float phase);

/// Megatron MLP on `tp` ranks, function "prefill", input "x" [batch,
/// tokens, hidden], output "y": y = all_reduce(gelu_tanh(rms_norm(x) W1^T)
/// W2^T), W1 ("mlp.up_proj.weight", [inter, hidden]) column-parallel and W2
/// ("mlp.down_proj.weight", [hidden, inter]) row-parallel on group "tp".
/// Two pipeline stages of a 2-rank "pp" group: "stage0" sends its
/// n-element input "x" to rank 1; "stage1" receives it as output "y" (on
/// stream `recvStream`), and takes an unused "x" too.
PlanBuilder sendRecvStages(int64_t n, int recvStream = 0);
/// Two ranks of a 2-rank "pp" group exchange their 2-element input "x"
/// into output "y": function "stage<r>" sends to and receives from the
/// other rank (the receive first with `recvFirst`), with an add between
/// the two with `opBetween` (so they are no group: P2PGroups.h). With
/// `async`, send_start and recv_start (handles 0 and 1 in start order),
/// then the waits, the second-started first.
PlanBuilder exchangeStages(bool recvFirst, bool opBetween, bool async = false);
/// Three stages of a 3-rank "pp" group, each with an n-element input "x":
/// "stage0" receives from rank 2 into output "a", then from rank 1 into
/// "b", the two adjacent (one group: P2PGroups.h); "stage1" sends x to
/// rank 0, adds (output "t", keeping the sends apart), sends x to rank 2;
/// "stage2" receives from rank 1 into "r", adds ("t"), sends x to rank 0.
/// Rank 2 sends only after rank 1's second send, which comes after rank
/// 1's lone send to 0: it completes only when stage0's group posts both
/// of its receives before waiting for either.
PlanBuilder groupReceivesStages(int64_t n);

/// A fused projection on `tp` (1 or 2) ranks of group "tp", function
/// "prefill": "q_proj.weight" [6, 8] and "k_proj.weight" [4, 8], each cut
/// on dim 0, are the pieces of pack 0 ([10 / tp, 8] per rank); input "x"
/// [2, 3, 8]; outputs "y" = x P^T over the pack, "yq" = x Wq^T and "yk" =
/// x Wk^T over the pieces read as parameters of their own.
PlanBuilder packedProjectionPlan(int tp);

/// GPT-2's MLP with its epilogues on the matmuls (what braid-fuse-compute
/// makes of it): input x [2, 8, 64], output y = gelu(x W1 + b1) W2 + b2,
/// the GELU tanh-approximated or exact (erf).
PlanBuilder gpt2MlpPlan(DType dt, bool tanhGelu = true);

PlanBuilder megatronMlpPlan(int tp, int64_t hidden, int64_t inter,
                            int64_t batch, int64_t tokens,
                            DType dtype = DType::F32);

/// Function "step", input "x" [n]: returns as "prev" the state slot "prev"
/// as it was at entry (the output is the slot's storage) and stores
/// silu(x) into it. Each step's "prev" is the previous step's silu(x).
PlanBuilder previousValuePlan(int64_t n);
/// World 4 on a 2 x 2 mesh: "dp" (stride 1) and "tp" (stride 2), so tp's
/// instances are ranks {0, 2} and {1, 3}. Function "decode" returns its
/// input "x" [2, 3] (through a reshape) as output "logits", sharded along
/// dim 1 over tp with full size 5: one column of padding.
PlanBuilder shardedOutputPlan();

} // namespace braid::rt::test

#endif // BRAID_TEST_RUNTIME_PLANTESTUTIL_H
