//===- Executor.cpp - Run a plan on GPUs: eager streams or CUDA Graphs ----===//
#include "runtime/cuda/Executor.h"

#include "runtime/P2PGroups.h"
#include "runtime/Threads.h"
#include "runtime/Weights.h"
#include "runtime/cuda/CudaCheck.h"
#include "runtime/cuda/DeviceComm.h"
#include "runtime/cuda/DeviceSelect.h"
#include "runtime/cuda/Gemm.h"
#include "runtime/cuda/HostRendezvous.h"
#include "runtime/cuda/Kernels.h"
#include "runtime/cuda/LaunchWindow.h"
#include "runtime/cuda/LibraryCheck.h"
#include "runtime/cuda/LocalComm.h"
#include "runtime/cuda/NcclComm.h"
#include "runtime/cuda/RankFaults.h"
#include "runtime/cuda/Resources.h"
#include "runtime/cuda/StreamPlan.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <optional>
#include <set>
#include <thread>

using namespace braid::rt;
using namespace braid::rt::cuda;
namespace plan = braid::plan;
using plan::OpCode;
using plan::TensorKind;

namespace {

int64_t product(const Shape &s, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end && i < s.size(); ++i)
    p *= s[i];
  return p;
}

} // namespace

//===----------------------------------------------------------------------===//
// Stream plan (StreamPlan.h): pure functions of the plan
//===----------------------------------------------------------------------===//

std::vector<CommKey> cuda::planCommunicators(const plan::Plan &p) {
  std::set<CommKey> keys;
  if (p.functions())
    for (const plan::Function *f : *p.functions())
      if (f->ops())
        for (const plan::Op *op : *f->ops())
          if (isCollectiveOpcode(op->opcode()))
            keys.insert({op->group(), op->stream()});
  return {keys.begin(), keys.end()};
}

std::vector<CommIdKey> cuda::planCommunicatorIds(const plan::Plan &p) {
  std::set<CommIdKey> ids;
  for (const CommKey &c : planCommunicators(p))
    for (int r = 0; r < p.world_size(); ++r)
      ids.insert(communicatorIdOf(p, c, r));
  return {ids.begin(), ids.end()};
}

CommIdKey cuda::communicatorIdOf(const plan::Plan &p, const CommKey &comm,
                                 int worldRank) {
  return {groupPosition(p, comm.group, worldRank).instanceKey, comm.stream};
}

std::vector<bool> cuda::planGemmStreams(const plan::Plan &p) {
  std::vector<bool> gemm;
  if (p.functions())
    for (const plan::Function *f : *p.functions()) {
      if (size_t(std::max(f->num_streams(), 1)) > gemm.size())
        gemm.resize(size_t(std::max(f->num_streams(), 1)), false);
      if (f->ops())
        for (const plan::Op *op : *f->ops())
          if (op->opcode() == OpCode::Matmul && op->stream() >= 0 &&
              size_t(op->stream()) < gemm.size())
            gemm[size_t(op->stream())] = true;
    }
  return gemm;
}

Expected<StreamPlan>
cuda::planFunctionStreams(const plan::Function &f,
                          const std::vector<CommKey> &comms) {
  std::string fn = "function '" + (f.name() ? f.name()->str() : "") + "': ";
  int numStreams = std::max(f.num_streams(), 1);
  unsigned n = f.ops() ? f.ops()->size() : 0;
  StreamPlan sp;
  sp.ops.resize(n);
  std::vector<bool> recorded(size_t(std::max(f.num_events(), 0)), false);
  std::vector<bool> used(size_t(numStreams), false);
  // Per handle: the latest start earlier in plan order (a handle may be
  // reused after its Wait), and the Wait that completes each start.
  std::vector<int> startOf(size_t(std::max(f.num_handles(), 0)), -1);
  std::vector<int> waitOfStart(n, -1);
  for (unsigned i = 0; i < n; ++i) {
    const plan::Op &op = *f.ops()->Get(i);
    int h = op.handle();
    bool start = syncOpcode(op.opcode()) != op.opcode();
    if ((start || op.opcode() == OpCode::Wait) &&
        (h < 0 || size_t(h) >= startOf.size()))
      return errorf(fn, "op ", i, ": handle ", h, " of ", f.num_handles());
    if (start)
      startOf[size_t(h)] = int(i);
    if (op.opcode() == OpCode::Wait) {
      if (startOf[size_t(h)] < 0)
        return errorf(fn, "op ", i, ": waits on handle ", h,
                      " with no start before it");
      waitOfStart[size_t(startOf[size_t(h)])] = int(i);
      startOf[size_t(h)] = -1;
    }
  }
  std::fill(startOf.begin(), startOf.end(), -1);
  for (unsigned i = 0; i < n; ++i) {
    const plan::Op &op = *f.ops()->Get(i);
    StreamPlan::OpSync &sync = sp.ops[i];
    if (op.stream() < 0 || op.stream() >= numStreams)
      return errorf(fn, "op ", i, ": stream ", op.stream(), " of ", numStreams);
    used[size_t(op.stream())] = true;
    if (op.wait_events())
      for (int e : *op.wait_events()) {
        if (e < 0 || size_t(e) >= recorded.size())
          return errorf(fn, "op ", i, ": waits on event ", e, " of ",
                        f.num_events());
        if (recorded[size_t(e)])
          sync.waitEvents.push_back(e);
      }
    if (op.record_events())
      for (int e : *op.record_events()) {
        if (e < 0 || size_t(e) >= recorded.size())
          return errorf(fn, "op ", i, ": records event ", e, " of ",
                        f.num_events());
        recorded[size_t(e)] = true;
        sync.recordEvents.push_back(e);
      }
    if (isCollectiveOpcode(op.opcode())) {
      auto it = std::lower_bound(comms.begin(), comms.end(),
                                 CommKey{op.group(), op.stream()});
      if (it == comms.end() || !(*it == CommKey{op.group(), op.stream()}))
        return errorf(fn, "op ", i, ": no communicator for group ", op.group(),
                      " on stream ", op.stream());
      sync.comm = int(it - comms.begin());
    }
    int h = op.handle();
    if (syncOpcode(op.opcode()) != op.opcode()) {
      startOf[size_t(h)] = int(i);
      int wait = waitOfStart[i];
      if (wait >= 0 && f.ops()->Get(unsigned(wait))->stream() != op.stream())
        sync.recordHandleEvent = sp.numHandleEvents++;
    }
    if (op.opcode() == OpCode::Wait) {
      const StreamPlan::OpSync &started = sp.ops[size_t(startOf[size_t(h)])];
      sync.waitHandleEvent = started.recordHandleEvent;
      startOf[size_t(h)] = -1;
    }
  }
  for (int s = 1; s < numStreams; ++s)
    if (used[size_t(s)])
      sp.forkedStreams.push_back(s);
  return sp;
}

namespace braid::rt::cuda {

/// What a rank posts at the single-GPU test mode's step meetings.
struct JointPost {
  cudaEvent_t event = nullptr;
  bool ok = true;
  int function = -1; // the function index the rank runs this step
};

/// The single-GPU test mode in graph mode. A rank's collectives make its
/// streams wait for its peers' events (LocalComm.h), and a graph can hold
/// such a wait only when both sides are in the same capture: the ranks of
/// the process are captured into one graph, which rank 0 launches. They
/// meet here to open and close that capture and around each launch.
struct JointSteps {
  JointSteps(int ranks, double timeoutSeconds)
      : meet(ranks, timeoutSeconds, "the single-GPU test mode's ranks") {}
  HostRendezvous<JointPost> meet;
  /// Releases peers waiting in a collective for a rank whose capture failed.
  std::function<void()> abortComms;
};

class CudaRank final : private CommTeardown {
public:
  /// Makes no CUDA call: setUp and connect (on the rank's thread) do.
  CudaRank(LoadedPlan plan, int rank, int device, ExecutorOptions options)
      : plan_(std::move(plan)), rank_(rank), device_(device),
        options_(options) {}
  ~CudaRank() override;

  /// Everything that can fail on this rank alone: memory, weights, streams,
  /// events, cuBLASLt, GEMM plans. No NCCL call (setUpRanks, RankFaults.h).
  Status setUp();
  /// Makes this rank's communicator of one (group, stream): NCCL's, or the
  /// one-GPU test communicator's.
  using CommFactory = std::function<Expected<std::unique_ptr<DeviceComm>>(
      const CommKey &key, const GroupPosition &pos, size_t scratchBytes)>;
  /// The communicators, then one all_reduce on each (warmUpComms); only
  /// once every rank's setUp succeeded, since ncclCommInitRank waits for
  /// all the ranks of a communicator. `stop`: another rank failed to
  /// connect.
  Status connect(const CommFactory &make, const std::atomic<bool> &stop);

  /// `cancel` is set by the runner when another rank failed: a rank
  /// waiting in a collective then aborts instead of waiting for the timeout.
  /// A failed step aborts this rank's communicators (CommLifetime).
  /// `sameFunction`: every rank of the step runs this function, so eager
  /// launches may be paced by the launch window (LaunchWindow.h: its
  /// waits cannot deadlock when matched operations sit at the same op
  /// index on every rank; a pipeline's stages may pair them far apart).
  Expected<TensorMap> run(const std::string &function, const TensorMap &inputs,
                          StepTiming &timing, const std::atomic<bool> &cancel,
                          bool sameFunction);
  /// Graphs destroyed, then communicators aborted (after another rank's
  /// failed step: its peers' communicators are gone).
  void abort();
  /// The single-GPU test mode in graph mode: this rank is `party` of the
  /// process's joint graph steps.
  void joinSteps(JointSteps *steps, int party) {
    joint_ = steps;
    party_ = party;
  }
  bool hasFunction(const std::string &name) const {
    return plan_.functionIndex(name) >= 0;
  }
  const std::vector<OpTime> &lastProfile() const { return profile_; }
  Status setParameter(const std::string &name, const HostTensor &local);

private:
  struct Function {
    const plan::Function *f = nullptr;
    StreamPlan streams; // events, communicators, fork/join per op
    DeviceMemory arena;
    std::vector<void *> ptr; // device storage of every tensor
    std::vector<Event> events;       // the plan's, by event id
    std::vector<Event> handleEvents; // cross-stream Waits (StreamPlan)
    Event fork;
    std::vector<Event> join; // one per streams.forkedStreams
    std::map<int, GemmPlan> gemms;     // by op index
    /// Matmuls whose epilogue (bias, GELU) cuBLASLt applies; any other
    /// matmul with an epilogue runs it as kernels after its GEMM.
    std::set<int> epilogueInGemm;
    std::vector<int> p2pGroupEnds;     // P2PGroups.h
    std::map<int, DeviceMemory> staging; // by op index
    /// Scaled RoPE frequency tables (rope_inv_freq), by op index; uploaded
    /// once when the plan is prepared.
    std::map<int, DeviceMemory> ropeTables;
    // Split-KV attention partials, by stream (the ops of one stream run in
    // order, so they share one; null where no attention splits).
    std::vector<DeviceMemory> attentionScratch;
    std::vector<size_t> attentionScratchBytes;
    DeviceMemory stateScratch; // permuted state slots (enqueue's copy-back)
    /// Page-locked host copies of the inputs and outputs, by tensor (none
    /// for an empty one): the step itself (its graph) copies them in and
    /// out, so a replay needs no pageable copy around it and the step's
    /// device time covers its whole transfer.
    std::map<int, PinnedMemory> pinnedInputs, pinnedOutputs;
    Graph graph;
    GraphExec exec;
    std::vector<Event> opBegin, opEnd; // with options.profile
    /// Eager mode's launch window marks (LaunchWindow.h): slot s, stream
    /// markStreams[k] at s * markStreams.size() + k.
    std::vector<int> markStreams; // 0 and the forked streams
    std::vector<Event> marks;
  };

  Status prepareFunction(Function &fn);
  /// The GEMM plan of matmul op `index` of `fn` for `shape` and `align`:
  /// cuBLASLt's heuristic choice, or with options_.gemmAutotune > 1 the
  /// fastest of that many candidates, timed once per (shape, alignment) on
  /// the op's parameters and zeroed stand-ins for its other operands and
  /// its result (their bytes may not be written yet, or must not change).
  Expected<GemmPlan> chooseGemm(Function &fn, const plan::Op &op,
                                const GemmShape &shape,
                                const GemmAlignment &align);
  /// Enqueues the step (capturing its graph the first time, in graph
  /// mode) between start_ and stop_ on stream 0.
  Status launchStep(Function &fn, StepTiming &timing,
                    const std::atomic<bool> &cancel, bool sameFunction);
  /// The same with joint steps: rank 0 launches the graph of every rank.
  Status launchJointStep(int function, StepTiming &timing);
  Status captureJointGraph(Function &fn, Graph &graph, GraphExec &exec);
  /// `pace` given: an eager launch, paced by the launch window so the host
  /// never blocks in a launch behind a stuck collective, with the step's
  /// timeout and `*pace` cancel checks while it waits; null: a capture, or
  /// ranks running different functions.
  Status enqueue(Function &fn, const std::atomic<bool> *pace = nullptr);
  Status runOp(Function &fn, int index, cudaStream_t stream);
  Status runCollective(Function &fn, int index, const plan::Op &op,
                       cudaStream_t stream);
  Expected<TensorMap> runStep(const std::string &function,
                              const TensorMap &inputs, StepTiming &timing,
                              const std::atomic<bool> &cancel,
                              bool sameFunction);
  /// Until every event has completed, or the step's timeout (counted from
  /// stepStart_), `cancel` or a communicator's error ends the wait.
  Status waitForStep(const std::vector<cudaEvent_t> &done,
                     const std::atomic<bool> &cancel);
  Status warmUpComms(const std::atomic<bool> &stop);
  // CommTeardown, in the order CommLifetime calls them.
  void destroyGraphs() override;
  void abortComms() override;
  void destroyComms() override;

  TensorRef ref(const Function &fn, int t) const {
    const plan::Tensor &x = *fn.f->tensors()->Get(unsigned(t));
    TensorRef r;
    r.data = fn.ptr[size_t(t)];
    r.dtype = x.dtype();
    if (x.shape())
      r.shape.assign(x.shape()->begin(), x.shape()->end());
    return r;
  }
  static size_t bytesOf(const TensorRef &r) {
    return size_t(numElements(r.shape)) * dtypeSize(r.dtype);
  }

  LoadedPlan plan_;
  int rank_;
  int device_;
  int multiprocessors_ = 0; // sizes split-KV attention
  ExecutorOptions options_;
  /// Plan.parameter_packs, one allocation each (cudaMalloc: 256-byte
  /// aligned); a piece lives inside its pack, at any multiple of its
  /// element size.
  std::vector<DeviceMemory> packs_;
  /// Parameters stored on their own (null for a packed piece).
  std::vector<DeviceMemory> params_;
  /// Every parameter's device slice: its own allocation or its range of
  /// its pack.
  std::vector<void *> paramData_;
  std::vector<DeviceMemory> state_;
  std::vector<Stream> streams_;
  /// One communicator per (group, stream) the plan's collectives use, in
  /// planCommunicators order (StreamPlan::OpSync::comm indexes it).
  std::vector<CommKey> commKeys_;
  std::vector<std::unique_ptr<DeviceComm>> comms_;
  size_t collectiveBytes_ = 0; // the largest collective result or operand
  DeviceMemory warmUpCell_;    // the floats warmUpComms reduces, one per comm
  /// One handle (it holds no stream), one workspace per stream that runs a
  /// GEMM (null elsewhere): concurrent split-K GEMMs never share one.
  CublasLtHandle lt_;
  std::vector<DeviceMemory> workspaces_; // by stream
  /// ExecutorOptions::gemmAutotune's choices, by shape and alignment
  /// (gemmTuningKey): every function's GEMMs of one kind are timed once.
  std::map<std::vector<int64_t>, GemmPlan> tunedGemms_;
  std::optional<DeviceErrorFlag> errors_;
  Event start_, stop_;
  std::chrono::steady_clock::time_point stepStart_; // the timeout's origin
  JointSteps *joint_ = nullptr;
  int party_ = 0;
  Event jointFork_, jointJoin_; // with joint steps
  /// With joint steps, by the function index each rank runs: rank 0 holds
  /// the graph of all of them; the others only remember it was captured.
  std::map<std::vector<int>, std::pair<Graph, GraphExec>> jointGraphs_;
  std::map<int, Function> functions_; // by function index
  CommLifetime lifetime_{*this};
  std::vector<OpTime> profile_;
};

} // namespace braid::rt::cuda

CudaRank::~CudaRank() {
  (void)cudaSetDevice(device_);
  // Graphs hold NCCL and cuBLASLt work: they go before the communicators
  // (destroyed, or already aborted) and the handle; the rest follows in
  // member order.
  lifetime_.end();
  lt_.reset();
}

void CudaRank::destroyGraphs() {
  for (auto &[index, fn] : functions_) {
    fn.exec.reset();
    fn.graph.reset();
  }
  jointGraphs_.clear(); // execs before graphs: pair members go in reverse
}

void CudaRank::abortComms() {
  NcclAbortBatch batch; // every flag set before any wait
  for (auto &c : comms_)
    c->abort();
}

void CudaRank::destroyComms() { comms_.clear(); }

void CudaRank::abort() {
  (void)cudaSetDevice(device_);
  lifetime_.abort();
}

Status CudaRank::setUp() {
  BRAID_CUDA_CHECK(cudaSetDevice(device_));
  BRAID_CUDA_CHECK(cudaDeviceGetAttribute(
      &multiprocessors_, cudaDevAttrMultiProcessorCount, device_));
  const plan::Plan &p = plan_.root();

  // Parameters: this rank's slice of the deterministic weights, generated
  // on the GPU with the CPU interpreter's formula (the same bits). A piece
  // of a pack is generated in place inside its pack.
  ParameterPacking packing = parameterPacking(p);
  for (const ParameterPacking::Pack &pack : packing.packs) {
    DeviceMemory mem;
    BRAID_CUDA_CHECK(
        cudaMalloc(mem.out(), std::max<size_t>(size_t(pack.bytes), 1)));
    packs_.push_back(std::move(mem));
  }
  if (p.parameters())
    for (unsigned i = 0; i < p.parameters()->size(); ++i) {
      const plan::Parameter *param = p.parameters()->Get(i);
      auto [full, local, padded] = parameterShapes(*param);
      TensorRef t;
      t.dtype = param->dtype();
      t.shape = local;
      DeviceMemory mem;
      const ParameterPacking::Place &place = packing.places[i];
      if (place.pack >= 0) {
        t.data = static_cast<uint8_t *>(packs_[size_t(place.pack)].get()) +
                 place.offset;
      } else {
        BRAID_CUDA_CHECK(
            cudaMalloc(mem.out(), std::max<size_t>(bytesOf(t), 1)));
        t.data = mem.get();
      }
      BRAID_RETURN_IF_ERROR(
          generateParameter(p, *param, rank_, options_.weights, t, nullptr));
      params_.push_back(std::move(mem));
      paramData_.push_back(t.data);
    }
  BRAID_CUDA_CHECK(cudaDeviceSynchronize());
  if (p.state())
    for (const plan::StateSlot *s : *p.state()) {
      size_t bytes = size_t(numElements(Shape(s->shape()->begin(),
                                              s->shape()->end()))) *
                     dtypeSize(s->dtype());
      DeviceMemory mem;
      BRAID_CUDA_CHECK(cudaMalloc(mem.out(), std::max<size_t>(bytes, 1)));
      BRAID_CUDA_CHECK(cudaMemset(mem.get(), 0, bytes));
      state_.push_back(std::move(mem));
    }

  int numStreams = 1;
  if (p.functions())
    for (const plan::Function *f : *p.functions())
      numStreams = std::max(numStreams, f->num_streams());
  for (int i = 0; i < numStreams; ++i) {
    Stream s;
    BRAID_CUDA_CHECK(cudaStreamCreateWithFlags(s.out(), cudaStreamNonBlocking));
    streams_.push_back(std::move(s));
  }
  BRAID_CUDA_CHECK(cudaEventCreate(start_.out()));
  BRAID_CUDA_CHECK(cudaEventCreate(stop_.out()));
  if (options_.singleGpuTest) {
    BRAID_CUDA_CHECK(
        cudaEventCreateWithFlags(jointFork_.out(), cudaEventDisableTiming));
    BRAID_CUDA_CHECK(
        cudaEventCreateWithFlags(jointJoin_.out(), cudaEventDisableTiming));
  }
  BRAID_CUBLAS_CHECK(cublasLtCreate(lt_.out()));
  std::vector<bool> gemmStreams = planGemmStreams(p);
  workspaces_.resize(streams_.size());
  for (size_t s = 0; s < gemmStreams.size() && s < streams_.size(); ++s)
    if (gemmStreams[s] && options_.gemmWorkspaceBytes)
      BRAID_CUDA_CHECK(
          cudaMalloc(workspaces_[s].out(), options_.gemmWorkspaceBytes));
  auto flag = DeviceErrorFlag::create();
  if (!flag)
    return flag.status();
  errors_ = std::move(*flag);

  // The communicators' keys (not the communicators): the functions' stream
  // plans index them.
  commKeys_ = planCommunicators(p);
  // One float per communicator for the warm-up all_reduces, zeroed and
  // waited for here, before any of them.
  size_t cells = std::max<size_t>(commKeys_.size(), 1) * sizeof(float);
  BRAID_CUDA_CHECK(cudaMalloc(warmUpCell_.out(), cells));
  BRAID_CUDA_CHECK(
      cudaMemsetAsync(warmUpCell_.get(), 0, cells, streams_[0].get()));
  BRAID_CUDA_CHECK(cudaStreamSynchronize(streams_[0].get()));
  if (p.functions())
    for (unsigned i = 0; i < p.functions()->size(); ++i) {
      Function &fn = functions_[int(i)];
      fn.f = p.functions()->Get(i);
      BRAID_RETURN_IF_ERROR(prepareFunction(fn));
    }
  // The memsets and pageable copies above ran on the default stream, which
  // the (non-blocking) plan streams do not wait for: done before any step.
  BRAID_CUDA_CHECK(cudaDeviceSynchronize());
  return Status::ok();
}

Status CudaRank::connect(const CommFactory &make,
                         const std::atomic<bool> &stop) {
  BRAID_CUDA_CHECK(cudaSetDevice(device_));
  const plan::Plan &p = plan_.root();
  // One communicator per (group, stream) the collectives use. Every rank
  // creates them in the same (sorted) order, each for its own group
  // instance on that stream, so the blocking inits pair up.
  for (const CommKey &key : commKeys_) {
    auto comm = make(key, groupPosition(p, key.group, rank_),
                     std::max(collectiveBytes_, sizeof(float)));
    if (!comm)
      return comm.status();
    comms_.push_back(comm.take());
  }
  if (rank_ == options_.testFailingConnectRank)
    return errorf("failed to connect on purpose (a test of a rank failing "
                  "in its first collective)");
  return warmUpComms(stop);
}

// NCCL connects a communicator's transports at first use (runtime
// connection, the default since NCCL 2.22), not in ncclCommInitRank. One
// eager all_reduce of one float per communicator, in the same sorted order
// on every rank, makes every rank meet every communicator here, with
// set-up's error path, timeout and abort, and connects what that small
// all_reduce's algorithm uses. It does not connect everything: another
// algorithm (a large all_reduce's, all_gather's, reduce_scatter's) and the
// point-to-point peers of sends, receives and all_to_alls connect at their
// first use, in the first graph capture or eager step.
Status CudaRank::warmUpComms(const std::atomic<bool> &stop) {
  if (comms_.empty())
    return Status::ok();
  auto *cell = static_cast<float *>(warmUpCell_.get());
  cudaStream_t main = streams_[0].get();
  // One after the other, each stream waiting for the previous all_reduce:
  // NCCL kernels of two communicators running concurrently may deadlock
  // (the hang rule the plan loader enforces on steps), and so may these.
  std::vector<Event> chain;
  cudaStream_t last = main;
  for (size_t i = 0; i < comms_.size(); ++i) {
    cudaStream_t s = streams_[size_t(commKeys_[i].stream)].get();
    if (s != last && !chain.empty())
      BRAID_CUDA_CHECK(cudaStreamWaitEvent(s, chain.back().get(), 0));
    BRAID_RETURN_IF_ERROR(comms_[i]->allReduce(
        cell + i, cell + i, 1, plan::DType::F32, plan::ReduceKind::Sum, s));
    Event e;
    BRAID_CUDA_CHECK(cudaEventCreateWithFlags(e.out(), cudaEventDisableTiming));
    BRAID_CUDA_CHECK(cudaEventRecord(e.get(), s));
    chain.push_back(std::move(e));
    last = s;
  }
  if (last != main)
    BRAID_CUDA_CHECK(cudaStreamWaitEvent(main, chain.back().get(), 0));
  BRAID_CUDA_CHECK(cudaEventRecord(stop_.get(), main));
  stepStart_ = std::chrono::steady_clock::now();
  Status done = waitForStep({stop_.get()}, stop);
  if (!done)
    return errorf("the first all_reduce on each communicator: ",
                  done.message());
  return Status::ok();
}

static std::vector<int64_t> gemmTuningKey(const GemmShape &s,
                                          const GemmAlignment &a) {
  return {s.batch,      s.m,          s.n,        s.k,
          s.transposeA, s.transposeB, s.batchedB, int64_t(s.dtype),
          s.bias,       s.gelu,       s.residual, a.a,
          a.b,          a.c,          a.bias,     a.residual};
}

Expected<GemmPlan> CudaRank::chooseGemm(Function &fn, const plan::Op &op,
                                        const GemmShape &shape,
                                        const GemmAlignment &align) {
  if (options_.gemmAutotune <= 1)
    return GemmPlan::create(lt_.get(), shape, options_.gemmWorkspaceBytes,
                            align);
  std::vector<int64_t> key = gemmTuningKey(shape, align);
  if (auto it = tunedGemms_.find(key); it != tunedGemms_.end())
    return it->second;
  // Parameters and state hold their values already; arena tensors may not
  // be written yet (a tool such as initcheck would flag reading them), so
  // zeroed buffers stand in, as for the result. cudaMalloc's 256-byte
  // alignment satisfies any the plan was made for.
  // The state slots' zeroing (cudaMemset, on the legacy stream) and the
  // weights are done before the timed GEMMs on streams_[0] (non-blocking)
  // read them.
  BRAID_CUDA_CHECK(cudaDeviceSynchronize());
  cudaStream_t stream = streams_[0].get();
  std::vector<DeviceMemory> standIns;
  // Declared after the stand-ins, so destroyed first: on every way out
  // the memsets and timed GEMMs that use them end before they are freed,
  // without counting on cudaFree's implicit device synchronization.
  struct WaitForStream {
    cudaStream_t stream;
    ~WaitForStream() {
      if (cudaStreamSynchronize(stream) != cudaSuccess)
        (void)cudaGetLastError(); // a sticky error resurfaces at the next call
    }
  } waitBeforeFree{stream};
  bool outOfMemory = false;
  auto zeroed = [&](size_t bytes) -> Expected<void *> {
    DeviceMemory mem;
    cudaError_t e = cudaMalloc(mem.out(), std::max<size_t>(bytes, 1));
    if (e == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError(); // not sticky: the heuristic's choice serves
      outOfMemory = true;
      return nullptr;
    }
    BRAID_CUDA_CHECK(e);
    BRAID_CUDA_CHECK(cudaMemsetAsync(mem.get(), 0, bytes, stream));
    standIns.push_back(std::move(mem));
    return standIns.back().get();
  };
  auto operand = [&](unsigned k) -> Expected<const void *> {
    int t = op.operands()->Get(k);
    switch (fn.f->tensors()->Get(unsigned(t))->kind()) {
    case TensorKind::Parameter:
    case TensorKind::PackedParameter:
    case TensorKind::State:
      return static_cast<const void *>(fn.ptr[size_t(t)]);
    default: {
      auto mem = zeroed(bytesOf(ref(fn, t)));
      if (!mem)
        return mem.status();
      return static_cast<const void *>(*mem);
    }
    }
  };
  GemmPlan::Operands x;
  auto a = operand(0), b = operand(1);
  if (!a)
    return a.status();
  if (!b)
    return b.status();
  x.a = *a;
  x.b = *b;
  if (shape.bias || shape.residual) {
    auto extra = operand(2);
    if (!extra)
      return extra.status();
    (shape.bias ? x.bias : x.residual) = *extra;
    if (shape.bias && shape.residual) {
      auto residual = operand(3);
      if (!residual)
        return residual.status();
      x.residual = *residual;
    }
  }
  auto c = zeroed(bytesOf(ref(fn, op.results()->Get(0))));
  if (!c)
    return c.status();
  x.c = *c;
  // No room for the stand-ins next to the arena: untuned, not a failure.
  if (outOfMemory)
    return GemmPlan::create(lt_.get(), shape, options_.gemmWorkspaceBytes,
                            align);
  // Timed on stream 0 with its own stream's workspace (nothing else runs
  // during set-up).
  void *workspace = workspaces_[size_t(op.stream())].get();
  auto best = GemmPlan::fastest(
      lt_.get(), shape, workspace ? options_.gemmWorkspaceBytes : 0,
      options_.gemmAutotune, align, x, workspace, stream);
  if (!best)
    return best.status();
  tunedGemms_.emplace(std::move(key), *best);
  return best;
}

Status CudaRank::prepareFunction(Function &fn) {
  const plan::Function &f = *fn.f;
  std::string where = "function '" + f.name()->str() + "': ";
  BRAID_CUDA_CHECK(cudaMalloc(fn.arena.out(),
                              std::max<size_t>(size_t(f.arena_size()), 1)));
  uint8_t *arena = static_cast<uint8_t *>(fn.arena.get());
  if (f.tensors())
    for (const plan::Tensor *t : *f.tensors()) {
      switch (t->kind()) {
      case TensorKind::Parameter:
        fn.ptr.push_back(paramData_[size_t(t->ref())]);
        break;
      case TensorKind::PackedParameter:
        fn.ptr.push_back(packs_[size_t(t->ref())].get());
        break;
      case TensorKind::State:
        fn.ptr.push_back(state_[size_t(t->ref())].get());
        break;
      default:
        fn.ptr.push_back(arena + t->buffer_offset());
      }
    }
  auto streams = planFunctionStreams(f, commKeys_);
  if (!streams)
    return streams.status();
  fn.streams = std::move(*streams);
  auto newEvents = [](std::vector<Event> &into, int count) -> Status {
    for (int i = 0; i < count; ++i) {
      Event e;
      BRAID_CUDA_CHECK(
          cudaEventCreateWithFlags(e.out(), cudaEventDisableTiming));
      into.push_back(std::move(e));
    }
    return Status::ok();
  };
  BRAID_RETURN_IF_ERROR(newEvents(fn.events, f.num_events()));
  BRAID_RETURN_IF_ERROR(newEvents(fn.handleEvents, fn.streams.numHandleEvents));
  BRAID_RETURN_IF_ERROR(
      newEvents(fn.join, int(fn.streams.forkedStreams.size())));
  BRAID_CUDA_CHECK(
      cudaEventCreateWithFlags(fn.fork.out(), cudaEventDisableTiming));
  if (!options_.graph) {
    fn.markStreams.push_back(0);
    fn.markStreams.insert(fn.markStreams.end(),
                          fn.streams.forkedStreams.begin(),
                          fn.streams.forkedStreams.end());
    BRAID_RETURN_IF_ERROR(newEvents(fn.marks, LaunchWindow().slots() *
                                                  int(fn.markStreams.size())));
  }
  if (options_.profile && f.ops())
    for (unsigned i = 0; i < f.ops()->size(); ++i) {
      Event begin, end;
      BRAID_CUDA_CHECK(cudaEventCreate(begin.out()));
      BRAID_CUDA_CHECK(cudaEventCreate(end.out()));
      fn.opBegin.push_back(std::move(begin));
      fn.opEnd.push_back(std::move(end));
    }
  // The state copy-back reads every source before it writes any slot; a
  // source that is another slot's storage (slots returned permuted) is
  // copied aside here first.
  size_t scratch = 0;
  if (f.state())
    for (const plan::StateBinding *b : *f.state())
      if (fn.ptr[size_t(b->output())] != state_[size_t(b->slot())].get() &&
          f.tensors()->Get(unsigned(b->output()))->kind() == TensorKind::State)
        scratch += bytesOf(ref(fn, b->output()));
  if (scratch)
    BRAID_CUDA_CHECK(cudaMalloc(fn.stateScratch.out(), scratch));
  auto pin = [&](const auto *bindings,
                 std::map<int, PinnedMemory> &into) -> Status {
    if (bindings)
      for (const plan::Binding *b : *bindings) {
        size_t bytes = bytesOf(ref(fn, b->tensor()));
        if (bytes == 0 || into.count(b->tensor()))
          continue;
        PinnedMemory mem;
        BRAID_CUDA_CHECK(cudaHostAlloc(mem.out(), bytes, cudaHostAllocDefault));
        into.emplace(b->tensor(), std::move(mem));
      }
    return Status::ok();
  };
  BRAID_RETURN_IF_ERROR(pin(f.inputs(), fn.pinnedInputs));
  BRAID_RETURN_IF_ERROR(pin(f.outputs(), fn.pinnedOutputs));
  // Everything a step needs is decided here, outside any capture: GEMM
  // algorithms (with their fused epilogues) and collective staging buffers.
  fn.p2pGroupEnds = p2pGroupEnds(f);
  if (f.ops())
    for (unsigned i = 0; i < f.ops()->size(); ++i) {
      const plan::Op &op = *f.ops()->Get(i);
      OpCode code = syncOpcode(op.opcode());
      if (code == OpCode::Matmul) {
        TensorRef a = ref(fn, op.operands()->Get(0)),
                  b = ref(fn, op.operands()->Get(1));
        auto shape = gemmShapeOf(a.shape, b.shape, op.transpose_a(),
                                 op.transpose_b(), a.dtype);
        if (!shape)
          return errorf(where, "op ", i, ": ", shape.status().message());
        // The algorithm is chosen for the operands' real alignment (arena
        // offsets need not be multiples of 256).
        GemmAlignment align;
        align.a = addressAlignment(a.data);
        align.b = addressAlignment(b.data);
        align.c = addressAlignment(fn.ptr[size_t(op.results()->Get(0))]);
        // The compiler decided the epilogue (braid-fuse-compute); cuBLASLt
        // applies a bias and a tanh GELU to one (unbatched) GEMM, when it
        // has an algorithm for them. Otherwise the GEMM runs plain and the
        // epilogue as kernels after it (runOp).
        bool tanhOrNone =
            !op.matmul_gelu() ||
            op.gelu_approximation() == plan::GeluApproximation::Tanh;
        if ((op.matmul_bias() || op.matmul_gelu() || op.matmul_residual()) &&
            options_.fuseEpilogues && shape->batch == 1 && tanhOrNone) {
          GemmShape fused = *shape;
          fused.bias = op.matmul_bias();
          fused.gelu = op.matmul_gelu();
          fused.residual = op.matmul_residual();
          GemmAlignment fusedAlign = align;
          if (fused.bias)
            fusedAlign.bias =
                addressAlignment(fn.ptr[size_t(op.operands()->Get(2))]);
          if (fused.residual)
            fusedAlign.residual = addressAlignment(
                fn.ptr[size_t(op.operands()->Get(fused.bias ? 3 : 2))]);
          auto gemm = chooseGemm(fn, op, fused, fusedAlign);
          if (gemm) {
            fn.epilogueInGemm.insert(int(i));
            fn.gemms.emplace(int(i), std::move(*gemm));
          }
        }
        if (!fn.gemms.count(int(i))) {
          auto gemm = chooseGemm(fn, op, *shape, align);
          if (!gemm)
            return errorf(where, "op ", i, ": ", gemm.status().message());
          fn.gemms.emplace(int(i), std::move(*gemm));
        }
      }
      if (code == OpCode::Attention) {
        TensorRef q = ref(fn, op.operands()->Get(0)),
                  k = ref(fn, op.operands()->Get(1));
        const bool cached = op.operands()->size() == 6;
        int64_t keyRows =
            cached ? ref(fn, op.operands()->Get(3)).shape.at(1) : q.shape.at(1);
        size_t bytes = attentionWorkspaceBytes(
            q.shape, k.shape.at(2), keyRows, multiprocessors_, 0, 0,
            tensorCoreAttention(options_.attentionKernel, q.shape,
                                cached ? keyRows : 0));
        size_t s = size_t(op.stream());
        if (fn.attentionScratchBytes.size() <= s)
          fn.attentionScratchBytes.resize(s + 1, 0);
        fn.attentionScratchBytes[s] =
            std::max(fn.attentionScratchBytes[s], bytes);
      }
      if (code == OpCode::Rope && op.rope_inv_freq() &&
          op.rope_inv_freq()->size() > 0) {
        const auto *inv = op.rope_inv_freq();
        std::vector<double> table(inv->begin(), inv->end());
        DeviceMemory mem;
        size_t bytes = table.size() * sizeof(double);
        BRAID_CUDA_CHECK(cudaMalloc(mem.out(), bytes));
        BRAID_CUDA_CHECK(
            cudaMemcpy(mem.get(), table.data(), bytes, cudaMemcpyHostToDevice));
        fn.ropeTables.emplace(int(i), std::move(mem));
      }
      if (isCollectiveOpcode(code))
        for (const auto *list : {op.operands(), op.results()})
          if (list)
            for (int t : *list)
              collectiveBytes_ = std::max(collectiveBytes_, bytesOf(ref(fn, t)));
      size_t staging = 0;
      if (code == OpCode::AllGather)
        staging = bytesOf(ref(fn, op.results()->Get(0)));
      if (code == OpCode::ReduceScatter)
        staging = bytesOf(ref(fn, op.operands()->Get(0)));
      if (code == OpCode::AllToAll)
        staging = 2 * bytesOf(ref(fn, op.operands()->Get(0)));
      if (staging) {
        DeviceMemory mem;
        BRAID_CUDA_CHECK(cudaMalloc(mem.out(), staging));
        fn.staging.emplace(int(i), std::move(mem));
      }
    }
  fn.attentionScratch.resize(fn.attentionScratchBytes.size());
  for (size_t s = 0; s < fn.attentionScratchBytes.size(); ++s)
    if (fn.attentionScratchBytes[s])
      BRAID_CUDA_CHECK(cudaMalloc(fn.attentionScratch[s].out(),
                                  fn.attentionScratchBytes[s]));
  return Status::ok();
}

Status CudaRank::runCollective(Function &fn, int index, const plan::Op &op,
                               cudaStream_t stream) {
  OpCode code = syncOpcode(op.opcode());
  // The communicator of (group, this op's stream): never shared with
  // another stream.
  DeviceComm &comm = *comms_[size_t(fn.streams.ops[size_t(index)].comm)];
  if (rank_ == options_.testStuckRank)
    return Status::ok(); // its peers wait for it (a test of the timeout)
  int n = groupPosition(plan_.root(), op.group(), rank_).size;
  auto hasOperand = op.operands() && op.operands()->size() > 0;
  auto hasResult = op.results() && op.results()->size() > 0;
  TensorRef in = hasOperand ? ref(fn, op.operands()->Get(0)) : TensorRef();
  TensorRef out = hasResult ? ref(fn, op.results()->Get(0)) : TensorRef();
  DType type = hasOperand ? in.dtype : out.dtype;
  size_t elem = dtypeSize(type);
  void *staging = fn.staging.count(index) ? fn.staging[index].get() : nullptr;

  switch (code) {
  case OpCode::AllReduce:
    return comm.allReduce(in.data, out.data, size_t(numElements(in.shape)),
                          type, op.reduce_kind(), stream);
  case OpCode::Broadcast:
    return comm.broadcast(in.data, out.data, size_t(numElements(in.shape)),
                          type, int(op.root()), stream);
  case OpCode::Send:
    return comm.send(in.data, size_t(numElements(in.shape)), type,
                     int(op.peer()), stream);
  case OpCode::Recv:
    return comm.recv(out.data, size_t(numElements(out.shape)), type,
                     int(op.peer()), stream);
  case OpCode::AllGather: {
    // NCCL concatenates the ranks' buffers: [n, local...]. Along a dim with
    // outer extent > 1 that layout is permuted into place.
    size_t d = size_t(op.dim());
    int64_t outer = product(in.shape, 0, d), ld = in.shape[d],
            inner = product(in.shape, d + 1, in.shape.size());
    size_t count = size_t(numElements(in.shape));
    if (outer == 1)
      return comm.allGather(in.data, out.data, count, type, stream);
    BRAID_RETURN_IF_ERROR(comm.allGather(in.data, staging, count, type, stream));
    return stridedCopy(out.data, {ld * inner, n * ld * inner, inner, 1},
                       staging, {outer * ld * inner, ld * inner, inner, 1},
                       {n, outer, ld, inner}, elem, stream);
  }
  case OpCode::ReduceScatter: {
    size_t d = size_t(op.dim());
    int64_t outer = product(in.shape, 0, d), full = in.shape[d],
            ld = full / n, inner = product(in.shape, d + 1, in.shape.size());
    size_t recv = size_t(numElements(out.shape));
    const void *src = in.data;
    if (outer != 1) {
      // Make each rank's piece contiguous: [outer, n, ld, inner] ->
      // [n, outer, ld, inner].
      BRAID_RETURN_IF_ERROR(stridedCopy(
          staging, {outer * ld * inner, ld * inner, inner, 1}, in.data,
          {ld * inner, full * inner, inner, 1}, {n, outer, ld, inner}, elem,
          stream));
      src = staging;
    }
    return comm.reduceScatter(src, out.data, recv, type, op.reduce_kind(),
                              stream);
  }
  case OpCode::AllToAll: {
    size_t s = size_t(op.split_dim()), c = size_t(op.concat_dim());
    int64_t outerS = product(in.shape, 0, s), fullS = in.shape[s],
            ls = fullS / n, innerS = product(in.shape, s + 1, in.shape.size());
    int64_t piece = numElements(in.shape) / n;
    uint8_t *sendBuf = static_cast<uint8_t *>(staging);
    uint8_t *recvBuf = sendBuf + size_t(piece) * size_t(n) * elem;
    // Piece j (along the split dim) goes to rank j: make pieces contiguous.
    BRAID_RETURN_IF_ERROR(stridedCopy(
        sendBuf, {outerS * ls * innerS, ls * innerS, innerS, 1}, in.data,
        {ls * innerS, fullS * innerS, innerS, 1}, {n, outerS, ls, innerS},
        elem, stream));
    BRAID_RETURN_IF_ERROR(
        comm.allToAll(sendBuf, recvBuf, size_t(piece), type, stream));
    // Received pieces, in rank order, concatenated along the concat dim.
    Shape pieceShape = in.shape;
    pieceShape[s] = ls;
    int64_t outerC = product(pieceShape, 0, c), lc = pieceShape[c],
            innerC = product(pieceShape, c + 1, pieceShape.size());
    return stridedCopy(out.data, {lc * innerC, n * lc * innerC, innerC, 1},
                       recvBuf, {piece, lc * innerC, innerC, 1},
                       {n, outerC, lc, innerC}, elem, stream);
  }
  default:
    return errorf("op ", index, ": not a collective");
  }
}

Status CudaRank::runOp(Function &fn, int index, cudaStream_t stream) {
  const plan::Op &op = *fn.f->ops()->Get(unsigned(index));
  auto operand = [&](unsigned i) { return ref(fn, op.operands()->Get(i)); };
  auto result = [&](unsigned i) { return ref(fn, op.results()->Get(i)); };
  switch (op.opcode()) {
  case OpCode::Matmul: {
    // The workspace of the op's stream: GEMMs running concurrently on two
    // streams never share split-K partials.
    void *workspace = workspaces_[size_t(op.stream())].get();
    size_t wsBytes = workspace ? options_.gemmWorkspaceBytes : 0;
    bool inGemm = fn.epilogueInGemm.count(index) > 0;
    unsigned residual = op.matmul_bias() ? 3 : 2; // its operand, if any
    BRAID_RETURN_IF_ERROR(fn.gemms.at(index).run(
        lt_.get(), operand(0).data, operand(1).data, result(0).data, workspace,
        wsBytes, stream, inGemm && op.matmul_bias() ? operand(2).data : nullptr,
        inGemm && op.matmul_residual() ? operand(residual).data : nullptr));
    if (inGemm)
      return Status::ok();
    // The epilogue cuBLASLt could not take, in place on the result (each
    // element is read and written by one thread). Rounds after each step,
    // unlike the fused form: within the plan's tolerance, not bit for bit.
    if (op.matmul_bias())
      BRAID_RETURN_IF_ERROR(
          binary(BinaryKind::Add, result(0), operand(2), result(0), stream));
    if (op.matmul_residual())
      BRAID_RETURN_IF_ERROR(binary(BinaryKind::Add, result(0),
                                   operand(residual), result(0), stream));
    if (op.matmul_gelu())
      return gelu(result(0), result(0),
                  op.gelu_approximation() == plan::GeluApproximation::Tanh
                      ? GeluKind::Tanh
                      : GeluKind::Erf,
                  stream);
    return Status::ok();
  }
  case OpCode::Add:
  case OpCode::Mul:
    return binary(op.opcode() == OpCode::Add ? BinaryKind::Add
                                             : BinaryKind::Mul,
                  operand(0), operand(1), result(0), stream);
  case OpCode::RmsNorm:
    return rmsNorm(operand(0), operand(1), result(0), op.epsilon(), stream);
  case OpCode::AddRmsNorm:
    return addRmsNorm(operand(0), operand(1), operand(2), result(0), result(1),
                      op.epsilon(), stream);
  case OpCode::LayerNorm:
    return layerNorm(operand(0), operand(1), operand(2), result(0),
                     op.epsilon(), stream);
  case OpCode::Rope: {
    auto table = fn.ropeTables.find(index);
    const double *invFreq =
        table == fn.ropeTables.end()
            ? nullptr
            : static_cast<const double *>(table->second.get());
    return rope(operand(0), operand(1), result(0), op.theta(), stream,
                invFreq, op.rope_attention_factor(), op.rope_rotary_dim());
  }
  case OpCode::Silu:
    return silu(operand(0), result(0), stream);
  case OpCode::Swiglu:
    return swiglu(operand(0), operand(1), result(0), stream);
  case OpCode::Gelu:
    return gelu(operand(0), result(0),
                op.gelu_approximation() == plan::GeluApproximation::Tanh
                    ? GeluKind::Tanh
                    : GeluKind::Erf,
                stream);
  case OpCode::Activation:
    return activation(operand(0), result(0), op.activation(), stream);
  case OpCode::Embedding: {
    TensorRef table = operand(1);
    int64_t start = embeddingVocabStart(plan_.root(), op, rank_, table.shape);
    return embedding(operand(0), table, result(0), start, stream);
  }
  case OpCode::Softmax:
    return softmax(operand(0), result(0), op.dim(), stream);
  case OpCode::Slice:
    return slice(operand(0), Shape(op.offsets()->begin(), op.offsets()->end()),
                 Shape(op.sizes()->begin(), op.sizes()->end()), result(0),
                 stream);
  case OpCode::Concat: {
    std::vector<TensorRef> inputs;
    for (unsigned i = 0; i < op.operands()->size(); ++i)
      inputs.push_back(operand(i));
    return concat(inputs, op.dim(), result(0), stream);
  }
  case OpCode::Reshape:
    return reshape(operand(0), result(0), stream);
  case OpCode::Attention: {
    AttentionParams p = cpu::attentionParamsOf(op);
    AttentionWorkspace ws;
    ws.tensorCore = tensorCoreAttention(
        options_.attentionKernel, operand(0).shape,
        op.operands()->size() == 6 ? operand(3).shape.at(1) : 0);
    ws.fuseCacheWrite = options_.fuseCacheWrite;
    if (size_t(op.stream()) < fn.attentionScratch.size()) {
      ws.data = fn.attentionScratch[size_t(op.stream())].get();
      ws.bytes = fn.attentionScratchBytes[size_t(op.stream())];
      ws.multiprocessors = multiprocessors_;
    }
    if (op.operands()->size() == 3)
      return attention(operand(0), operand(1), operand(2), result(0), p,
                       stream, ws);
    // The kernel updates the cache in place: a plan whose updated cache is
    // another buffer gets a copy of the old cache there first.
    for (unsigned i : {1u, 2u})
      if (result(i).data != operand(i + 2).data)
        BRAID_CUDA_CHECK(cudaMemcpyAsync(result(i).data, operand(i + 2).data,
                                         bytesOf(result(i)),
                                         cudaMemcpyDeviceToDevice, stream));
    return attentionWithCache(operand(0), operand(1), operand(2), result(1),
                              result(2), operand(5), result(0), p,
                              errors_->get(), stream, ws);
  }
  case OpCode::Wait:
    // The collective was enqueued on its start's stream; a Wait on another
    // stream waited for it in enqueue (StreamPlan's handle event).
    return Status::ok();
  default:
    return runCollective(fn, index, op, stream);
  }
}

Status CudaRank::enqueue(Function &fn, const std::atomic<bool> *pace) {
  const plan::Function &f = *fn.f;
  const StreamPlan &sp = fn.streams;
  cudaStream_t main = streams_[0].get();
  std::optional<LaunchWindow> window;
  if (pace)
    window.emplace();
  // The events of one window mark, on every stream the step uses.
  auto markEvents = [&](int slot) {
    std::vector<cudaEvent_t> events;
    for (size_t k = 0; k < fn.markStreams.size(); ++k)
      events.push_back(
          fn.marks[size_t(slot) * fn.markStreams.size() + k].get());
    return events;
  };
  // The inputs, from their page-locked copies (runStep fills them).
  for (const auto &[t, host] : fn.pinnedInputs) {
    TensorRef x = ref(fn, t);
    BRAID_CUDA_CHECK(cudaMemcpyAsync(x.data, host.get(), bytesOf(x),
                                     cudaMemcpyHostToDevice, main));
  }
  // Fork: every other stream the function uses starts after stream 0's work
  // so far (the inputs). Under capture this also pulls those streams into
  // the capture that stream 0 began.
  BRAID_CUDA_CHECK(cudaEventRecord(fn.fork.get(), main));
  for (int s : sp.forkedStreams)
    BRAID_CUDA_CHECK(
        cudaStreamWaitEvent(streams_[size_t(s)].get(), fn.fork.get(), 0));
  DeviceComm *group = nullptr; // an open point-to-point group
  int groupFirst = -1, groupEnd = -1;
  std::vector<int> groupHandleEvents; // of its members, recorded at its end
  if (f.ops())
    for (unsigned i = 0; i < f.ops()->size(); ++i) {
      const plan::Op &op = *f.ops()->Get(i);
      const StreamPlan::OpSync &sync = sp.ops[i];
      cudaStream_t stream = streams_[size_t(op.stream())].get();
      // Eager: at most the window's ops ahead of the GPU. Never inside an
      // open group, whose members NCCL issues only at its end.
      if (window && !group)
        for (int slot; (slot = window->slotToAwait()) >= 0;)
          BRAID_RETURN_IF_ERROR(waitForStep(markEvents(slot), *pace));
      // Every failure from here to the group's end goes through `st`, so an
      // open group is always closed.
      Status st = Status::ok();
      auto check = [&st](Status s) {
        if (st && !s)
          st = std::move(s);
      };
      // Enqueued in plan order, so each wait sees the event's latest
      // record earlier in plan order, as the plan means.
      for (int e : sync.waitEvents)
        check(BRAID_CUDA_STATUS(
            cudaStreamWaitEvent(stream, fn.events[size_t(e)].get(), 0)));
      // A Wait on another stream than its start: wait for the collective
      // (before any event this Wait records, which must cover it).
      if (sync.waitHandleEvent >= 0)
        check(BRAID_CUDA_STATUS(cudaStreamWaitEvent(
            stream, fn.handleEvents[size_t(sync.waitHandleEvent)].get(), 0)));
      // Adjacent sends and receives progress together (P2PGroups.h). NCCL
      // issues a group's members at its ncclGroupEnd, so with profiling
      // each member is timed as the whole group: every member's begin event
      // before the group starts, every end event after it ends.
      const bool opensGroup =
          !group && fn.p2pGroupEnds[i] >= 0 && sync.comm >= 0;
      if (options_.profile && !group)
        for (int j = int(i); j < (opensGroup ? fn.p2pGroupEnds[i] : int(i) + 1);
             ++j)
          check(BRAID_CUDA_STATUS(
              cudaEventRecord(fn.opBegin[size_t(j)].get(), stream)));
      if (st && opensGroup) {
        st = comms_[size_t(sync.comm)]->groupStart();
        if (st) {
          group = comms_[size_t(sync.comm)].get();
          groupFirst = int(i);
          groupEnd = fn.p2pGroupEnds[i];
        }
      }
      if (st)
        st = runOp(fn, int(i), stream);
      // The group is closed even when a member failed.
      const int first = group ? groupFirst : int(i);
      if (group && (int(i) + 1 == groupEnd || !st)) {
        Status closed = group->groupEnd();
        group = nullptr;
        if (st)
          st = closed;
      }
      if (options_.profile && st && !group)
        for (int j = first; j <= int(i); ++j)
          check(BRAID_CUDA_STATUS(
              cudaEventRecord(fn.opEnd[size_t(j)].get(), stream)));
      if (!st) {
        const char *name = opcodeName(op.opcode());
        return errorf("function '", f.name()->str(), "' op ", i, " (",
                      name ? name : "?", ")",
                      op.loc() ? " at " + op.loc()->str() : std::string(),
                      ": ", st.message());
      }
      // Right after the collective is issued, so a Wait elsewhere waits
      // for it and not for what this stream runs next. A member of an open
      // group is issued only at its groupEnd: its event waits until then.
      if (sync.recordHandleEvent >= 0)
        groupHandleEvents.push_back(sync.recordHandleEvent);
      if (!group) {
        for (int h : groupHandleEvents)
          BRAID_CUDA_CHECK(
              cudaEventRecord(fn.handleEvents[size_t(h)].get(), stream));
        groupHandleEvents.clear();
      }
      for (int e : sync.recordEvents)
        BRAID_CUDA_CHECK(cudaEventRecord(fn.events[size_t(e)].get(), stream));
      if (int slot = window ? window->slotToRecord(int(i)) : -1; slot >= 0) {
        std::vector<cudaEvent_t> mark = markEvents(slot);
        for (size_t k = 0; k < mark.size(); ++k)
          BRAID_CUDA_CHECK(cudaEventRecord(
              mark[k], streams_[size_t(fn.markStreams[k])].get()));
      }
    }
  // Join every forked stream back into stream 0 (a capture must end with
  // all of them joined to its origin stream).
  for (size_t j = 0; j < sp.forkedStreams.size(); ++j) {
    cudaStream_t s = streams_[size_t(sp.forkedStreams[j])].get();
    BRAID_CUDA_CHECK(cudaEventRecord(fn.join[j].get(), s));
    BRAID_CUDA_CHECK(cudaStreamWaitEvent(main, fn.join[j].get(), 0));
  }
  // The outputs, into their page-locked copies, which runStep reads once
  // the step ended. Before the state copy-back: an output that is a state
  // slot's storage holds the function's value of it (the entry value, or
  // one computed in place), which the copy-back may replace.
  for (const auto &[t, host] : fn.pinnedOutputs) {
    TensorRef x = ref(fn, t);
    BRAID_CUDA_CHECK(cudaMemcpyAsync(host.get(), x.data, bytesOf(x),
                                     cudaMemcpyDeviceToHost, main));
  }
  // State updated out of place is copied into its slot, as one
  // simultaneous assignment: sources that are other slots go through the
  // scratch buffer first (see prepareFunction), so that no slot write
  // clobbers a source still to be read.
  if (f.state()) {
    std::vector<const void *> source;
    uint8_t *scratch = static_cast<uint8_t *>(fn.stateScratch.get());
    for (const plan::StateBinding *b : *f.state()) {
      void *slot = state_[size_t(b->slot())].get();
      TensorRef out = ref(fn, b->output());
      source.push_back(out.data);
      if (out.data == slot ||
          f.tensors()->Get(unsigned(b->output()))->kind() != TensorKind::State)
        continue;
      BRAID_CUDA_CHECK(cudaMemcpyAsync(scratch, out.data, bytesOf(out),
                                       cudaMemcpyDeviceToDevice, main));
      source.back() = scratch;
      scratch += bytesOf(out);
    }
    for (unsigned i = 0; i < f.state()->size(); ++i) {
      const plan::StateBinding *b = f.state()->Get(i);
      void *slot = state_[size_t(b->slot())].get();
      if (source[i] != slot)
        BRAID_CUDA_CHECK(cudaMemcpyAsync(slot, source[i],
                                         bytesOf(ref(fn, b->output())),
                                         cudaMemcpyDeviceToDevice, main));
    }
  }
  return Status::ok();
}

// Every error return below is followed by CommLifetime::step's abort
// (graphs destroyed first), so no rank waits on a stuck collective.
Status CudaRank::waitForStep(const std::vector<cudaEvent_t> &done,
                             const std::atomic<bool> &cancel) {
  // A decode step can end a few microseconds after its last launch: spin on
  // the event for this long before sleeping between polls (a sleep costs at
  // least its 50 us, often more, added to every step).
  constexpr double spinSeconds = 200e-6;
  auto start = std::chrono::steady_clock::now();
  size_t ended = 0; // done[0, ended) have completed
  for (;;) {
    cudaError_t q = cudaSuccess;
    while (ended < done.size() &&
           (q = cudaEventQuery(done[ended])) == cudaSuccess)
      ++ended;
    // A communicator's error can also end a step: the test communicator's
    // waits return when they time out.
    for (const auto &comm : comms_)
      BRAID_RETURN_IF_ERROR(comm->asyncError());
    if (ended == done.size())
      return Status::ok();
    if (q != cudaErrorNotReady)
      BRAID_CUDA_CHECK(q);
    if (cancel.load())
      return errorf("aborted: another rank failed");
    auto now = std::chrono::steady_clock::now();
    double waited = std::chrono::duration<double>(now - start).count();
    if (std::chrono::duration<double>(now - stepStart_).count() >
        options_.stepTimeoutSeconds)
      return errorf("step did not finish within ", options_.stepTimeoutSeconds,
                    " s (a collective is stuck: do all ranks run the same "
                    "plan?); communicators aborted");
    if (waited > spinSeconds)
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

Expected<TensorMap> CudaRank::run(const std::string &function,
                                  const TensorMap &inputs, StepTiming &timing,
                                  const std::atomic<bool> &cancel,
                                  bool sameFunction) {
  // A step that fails here, whatever the cause, may leave peers in
  // collectives with this rank: its communicators are aborted.
  return lifetime_.step(
      [&] { return runStep(function, inputs, timing, cancel, sameFunction); });
}

Status CudaRank::launchStep(Function &fn, StepTiming &timing,
                            const std::atomic<bool> &cancel,
                            bool sameFunction) {
  cudaStream_t main = streams_[0].get();
  if (options_.graph && !fn.exec) {
    // Capture once; instantiate and upload before the first launch.
    BRAID_CUDA_CHECK(
        cudaStreamBeginCapture(main, cudaStreamCaptureModeThreadLocal));
    Status st = enqueue(fn);
    cudaGraph_t graph = nullptr;
    cudaError_t end = cudaStreamEndCapture(main, &graph);
    fn.graph = Graph(graph);
    BRAID_RETURN_IF_ERROR(st);
    BRAID_CUDA_CHECK(end);
    BRAID_CUDA_CHECK(cudaGraphInstantiate(fn.exec.out(), fn.graph.get(), 0));
    BRAID_CUDA_CHECK(cudaGraphUpload(fn.exec.get(), main));
    timing.captured = true;
  }
  BRAID_CUDA_CHECK(cudaEventRecord(start_.get(), main));
  auto hostStart = std::chrono::steady_clock::now();
  if (options_.graph)
    BRAID_CUDA_CHECK(cudaGraphLaunch(fn.exec.get(), main));
  else {
    if (options_.testStallSeconds > 0)
      BRAID_RETURN_IF_ERROR(stallForTest(options_.testStallSeconds, main));
    BRAID_RETURN_IF_ERROR(enqueue(fn, sameFunction ? &cancel : nullptr));
  }
  timing.hostLaunchMs = std::chrono::duration<double, std::milli>(
                            std::chrono::steady_clock::now() - hostStart)
                            .count();
  BRAID_CUDA_CHECK(cudaEventRecord(stop_.get(), main));
  return Status::ok();
}

namespace {
bool allOk(const std::vector<JointPost> &posts) {
  return std::all_of(posts.begin(), posts.end(),
                     [](const JointPost &p) { return p.ok; });
}
} // namespace

Status CudaRank::captureJointGraph(Function &fn, Graph &graph,
                                   GraphExec &exec) {
  // Rank 0 opens the capture; the others' stream 0 joins it through rank
  // 0's fork event; every rank enqueues its step (its collectives meet
  // their peers inside the capture); rank 0 closes the capture once every
  // rank has handed its stream back, failed or not, so the capture always
  // ends whole.
  cudaStream_t main = streams_[0].get();
  bool origin = party_ == 0;
  Status st = Status::ok();
  // Whether rank 0's capture is open: it must be ended even when what
  // follows the begin fails.
  bool began = false;
  if (origin) {
    st = BRAID_CUDA_STATUS(
        cudaStreamBeginCapture(main, cudaStreamCaptureModeThreadLocal));
    began = bool(st);
    if (st)
      st = BRAID_CUDA_STATUS(cudaEventRecord(jointFork_.get(), main));
  }
  auto opened = joint_->meet.arrive(party_, {jointFork_.get(), bool(st)});
  if (opened && allOk(*opened)) {
    if (!origin)
      st = BRAID_CUDA_STATUS(cudaStreamWaitEvent(main, (*opened)[0].event, 0));
    if (st)
      st = enqueue(fn);
    // Peers blocked in a collective this rank will not join go on now.
    if (!st && joint_->abortComms)
      joint_->abortComms();
  } else if (st) {
    st = opened ? errorf("aborted: another rank failed (opening the joint "
                         "graph capture)")
                : opened.status();
  }
  cudaEvent_t handBack = nullptr;
  if (!origin && opened && allOk(*opened) &&
      cudaEventRecord(jointJoin_.get(), main) == cudaSuccess)
    handBack = jointJoin_.get();
  auto closed = joint_->meet.arrive(party_, {handBack, bool(st)});
  if (began) {
    if (closed)
      for (size_t r = 1; r < closed->size(); ++r)
        if ((*closed)[r].event)
          (void)cudaStreamWaitEvent(main, (*closed)[r].event, 0);
    cudaGraph_t captured = nullptr;
    cudaError_t end = cudaStreamEndCapture(main, &captured);
    graph = Graph(captured);
    if (st && closed && allOk(*closed)) {
      st = BRAID_CUDA_STATUS(end);
      if (st)
        st =
            BRAID_CUDA_STATUS(cudaGraphInstantiate(exec.out(), graph.get(), 0));
      if (st)
        st = BRAID_CUDA_STATUS(cudaGraphUpload(exec.get(), main));
    }
  }
  if (st && !closed)
    st = closed.status();
  if (st && !allOk(*closed))
    st = errorf("aborted: another rank failed (capturing the joint graph)");
  return st;
}

Status CudaRank::launchJointStep(int function, StepTiming &timing) {
  cudaStream_t main = streams_[0].get();
  bool origin = party_ == 0;
  // The ranks tell each other what they run and, but for rank 0, when
  // their stream 0 is ready (start_: a rank's own times are rank 0's,
  // whose events bracket the whole graph, input and output copies
  // included).
  if (!origin)
    BRAID_CUDA_CHECK(cudaEventRecord(start_.get(), main));
  auto ready = joint_->meet.arrive(
      party_, {origin ? nullptr : start_.get(), true, function});
  if (!ready)
    return ready.status();
  std::vector<int> key;
  for (const JointPost &p : *ready)
    key.push_back(p.function);
  if (!jointGraphs_.count(key)) {
    std::pair<Graph, GraphExec> made;
    Status st =
        captureJointGraph(functions_.at(function), made.first, made.second);
    // Everyone learns whether every rank (rank 0: and the graph) succeeded.
    auto verdict = joint_->meet.arrive(party_, {nullptr, bool(st), function});
    BRAID_RETURN_IF_ERROR(st);
    if (!verdict)
      return verdict.status();
    if (!allOk(*verdict))
      return errorf("aborted: another rank failed (capturing the joint "
                    "graph)");
    jointGraphs_[key] = std::move(made);
    timing.captured = true;
  }
  // Rank 0 launches once every rank's stream 0 is ready and its pinned
  // inputs are filled; the others' stream 0 waits for the graph to end.
  auto hostStart = std::chrono::steady_clock::now();
  Status launched = Status::ok();
  if (origin) {
    for (size_t r = 1; r < ready->size() && launched; ++r)
      launched =
          BRAID_CUDA_STATUS(cudaStreamWaitEvent(main, (*ready)[r].event, 0));
    if (launched)
      launched = BRAID_CUDA_STATUS(cudaEventRecord(start_.get(), main));
    if (launched)
      launched = BRAID_CUDA_STATUS(
          cudaGraphLaunch(jointGraphs_[key].second.get(), main));
    if (launched)
      launched = BRAID_CUDA_STATUS(cudaEventRecord(stop_.get(), main));
  }
  timing.hostLaunchMs = std::chrono::duration<double, std::milli>(
                            std::chrono::steady_clock::now() - hostStart)
                            .count();
  auto done =
      joint_->meet.arrive(party_, {stop_.get(), bool(launched), function});
  BRAID_RETURN_IF_ERROR(launched);
  if (!done)
    return done.status();
  if (!allOk(*done))
    return errorf("aborted: another rank failed (launching the joint graph)");
  if (!origin) {
    BRAID_CUDA_CHECK(cudaStreamWaitEvent(main, (*done)[0].event, 0));
    BRAID_CUDA_CHECK(cudaEventRecord(stop_.get(), main));
  }
  return Status::ok();
}

Expected<TensorMap> CudaRank::runStep(const std::string &function,
                                      const TensorMap &inputs,
                                      StepTiming &timing,
                                      const std::atomic<bool> &cancel,
                                      bool sameFunction) {
  BRAID_CUDA_CHECK(cudaSetDevice(device_));
  if (rank_ == options_.testFailingRank)
    return errorf("failed on purpose (a test of a rank failing alone)");
  int fi = plan_.functionIndex(function);
  if (fi < 0)
    return errorf("plan has no function '", function, "'");
  Function &fn = functions_.at(fi);
  const plan::Function &f = *fn.f;
  cudaStream_t main = streams_[0].get();

  auto bound = bindInputs(f, inputs);
  if (!bound)
    return bound.status();
  // The previous step has ended (waitForStep): its graph no longer reads
  // these copies. bindInputs checked each value's byte size.
  for (const BoundInput &in : *bound)
    if (auto it = fn.pinnedInputs.find(in.tensor); it != fn.pinnedInputs.end())
      std::memcpy(it->second.get(), in.value->bytes.data(),
                  in.value->bytes.size());

  timing = StepTiming();
  stepStart_ = std::chrono::steady_clock::now();
  BRAID_RETURN_IF_ERROR(joint_ && options_.graph
                            ? launchJointStep(fi, timing)
                            : launchStep(fn, timing, cancel, sameFunction));
  BRAID_RETURN_IF_ERROR(waitForStep({stop_.get()}, cancel));
  float ms = 0;
  BRAID_CUDA_CHECK(cudaEventElapsedTime(&ms, start_.get(), stop_.get()));
  timing.deviceMs = ms;
  BRAID_RETURN_IF_ERROR(errors_->check(main));
  profile_.clear();
  if (options_.profile && f.ops())
    for (unsigned i = 0; i < f.ops()->size(); ++i) {
      float begin = 0, length = 0;
      BRAID_CUDA_CHECK(
          cudaEventElapsedTime(&begin, start_.get(), fn.opBegin[i].get()));
      BRAID_CUDA_CHECK(cudaEventElapsedTime(&length, fn.opBegin[i].get(),
                                            fn.opEnd[i].get()));
      OpTime t = opTimeOf(f, int(i));
      t.start = double(begin) * 1e-3;
      t.seconds = double(length) * 1e-3;
      profile_.push_back(std::move(t));
    }

  TensorMap outputs;
  if (f.outputs())
    for (const plan::Binding *b : *f.outputs()) {
      TensorRef t = ref(fn, b->tensor());
      HostTensor h(t.dtype, t.shape);
      if (auto it = fn.pinnedOutputs.find(b->tensor());
          it != fn.pinnedOutputs.end())
        std::memcpy(h.bytes.data(), it->second.get(), h.bytes.size());
      outputs[b->name()->str()] = std::move(h);
    }
  return outputs;
}

Status CudaRank::setParameter(const std::string &name,
                              const HostTensor &local) {
  BRAID_CUDA_CHECK(cudaSetDevice(device_));
  auto slot = parameterSlotFor(plan_.root(), name, local);
  if (!slot)
    return slot.status();
  size_t bytes = size_t(numElements(local.shape)) * dtypeSize(local.dtype);
  if (local.bytes.size() != bytes)
    return errorf("parameter '", name, "': ", local.bytes.size(),
                  " bytes for a ", formatShape(local.shape), " x ",
                  dtypeName(local.dtype), " tensor of ", bytes);
  // A packed piece is written inside its pack: the pack reads it at once.
  BRAID_CUDA_CHECK(cudaMemcpy(paramData_[*slot], local.bytes.data(), bytes,
                              cudaMemcpyHostToDevice));
  // A pageable copy may return before its last DMA lands, on the default
  // stream the plan streams do not wait for.
  BRAID_CUDA_CHECK(cudaStreamSynchronize(nullptr));
  return Status::ok();
}

//===----------------------------------------------------------------------===//
// CudaRunner
//===----------------------------------------------------------------------===//

Expected<int> cuda::usableDeviceCount() {
  BRAID_RETURN_IF_ERROR(cudaDeviceAvailable());
  int count = 0;
  BRAID_CUDA_CHECK(cudaGetDeviceCount(&count));
  return count;
}

CudaRunner::~CudaRunner() = default;

Expected<std::unique_ptr<CudaRunner>>
CudaRunner::create(LoadedPlan plan, const ExecutorOptions &options,
                   Bootstrap *processes) {
  if (options.profile && options.graph)
    return errorf("per-op profiling needs eager launch: a CUDA Graph "
                  "replays as one launch");
  const plan::Plan &p = plan.root();
  int world = p.world_size();
  if (processes && processes->size() != world)
    return errorf("the plan was compiled for ", world, " ranks; the run has ",
                  processes->size(), " processes");
  bool oneGpu = options.singleGpuTest;
  if (oneGpu && processes)
    return errorf("the single-GPU test communicator runs every rank in one "
                  "process, not one process per rank");
  if (oneGpu && options.devices.size() > 1)
    return errorf("the single-GPU test communicator runs every rank on one "
                  "GPU; ", options.devices.size(), " were named");
  if (!oneGpu && (options.testStuckRank >= 0 || options.testFailingRank >= 0 ||
                  options.testFailingConnectRank >= 0))
    return errorf("injected rank faults need the single-GPU test "
                  "communicator");
  auto devices = usableDeviceCount();
  if (!devices)
    return devices.status();

  // This process's ranks and their GPUs (DeviceSelect.h). One process per
  // rank: its local rank picks, modulo the GPUs it sees (one, when the
  // launcher sets CUDA_VISIBLE_DEVICES per rank). One process for every
  // rank: rank r runs on GPU r, so there must be a GPU per rank.
  std::vector<int> held, gpus;
  for (int r = 0; r < world; ++r)
    if (!processes || r == processes->rank())
      held.push_back(r);
  if (!processes && !oneGpu && options.devices.empty() && world > *devices)
    return errorf("the plan has ", world, " ranks but this process sees ",
                  *devices, " GPUs; one process runs one rank per GPU (or "
                  "start one process per rank with mpirun/srun)");
  for (int r : held) {
    int slot = processes ? processes->localRank() : oneGpu ? 0 : r;
    auto gpu = selectDevice(slot, *devices, options.devices);
    if (!gpu)
      return errorf("rank ", r, ": ", gpu.status().message());
    if (!oneGpu && std::count(gpus.begin(), gpus.end(), *gpu))
      return errorf("GPU ", *gpu, " is named for two ranks; NCCL needs one "
                    "GPU per rank");
    gpus.push_back(*gpu);
  }

  // One NCCL id per (group instance, stream) a collective uses: made here
  // for a single process, by rank 0 and broadcast (in key order, which
  // depends on the plan alone) for several.
  std::map<CommIdKey, ncclUniqueId> ids;
  Status made = [&]() -> Status {
    if (oneGpu)
      return Status::ok();
    for (const CommIdKey &key : planCommunicatorIds(p)) {
      ncclUniqueId &id = ids[key] = ncclUniqueId{};
      if (!processes || processes->rank() == 0)
        BRAID_NCCL_CHECK(ncclGetUniqueId(&id));
    }
    return Status::ok();
  }();
  if (!made && !processes)
    return made;
  if (processes) {
    // Rank 0 broadcasts even when it failed (nothing), so that the others
    // stop at the size check instead of waiting.
    std::string blob;
    if (made)
      for (const auto &[key, id] : ids)
        blob.append(id.internal, sizeof id.internal);
    BRAID_RETURN_IF_ERROR(processes->broadcast(blob, 0));
    BRAID_RETURN_IF_ERROR(made);
    if (blob.size() != ids.size() * sizeof(ncclUniqueId::internal))
      return errorf("rank 0 sent ", blob.size(), " bytes of NCCL ids, ",
                    ids.size(), " ids need ",
                    ids.size() * sizeof(ncclUniqueId::internal));
    size_t at = 0;
    for (auto &[key, id] : ids) {
      std::memcpy(id.internal, blob.data() + at, sizeof id.internal);
      at += sizeof id.internal;
    }
  }

  std::unique_ptr<CudaRunner> runner(new CudaRunner());
  runner->held_ = held;
  runner->plan_ = plan;
  runner->checkCommunication_ = options.checkCommunication;
  for (size_t i = 0; i < held.size(); ++i)
    runner->ranks_.push_back(
        std::make_unique<CudaRank>(plan, held[i], gpus[i], options));
  // The test communicator gives up a little before the host does, so the
  // error names the rank that waited and the one it waited for.
  auto local =
      std::make_shared<LocalCommRegistry>(options.stepTimeoutSeconds * 0.9);
  if (oneGpu) {
    runner->local_ = local;
    if (options.graph && held.size() > 1) {
      runner->joint_ = std::make_shared<JointSteps>(int(held.size()),
                                                    options.stepTimeoutSeconds);
      runner->joint_->abortComms = [local] { local->abortAll(); };
      for (size_t i = 0; i < held.size(); ++i)
        runner->ranks_[i]->joinSteps(runner->joint_.get(), int(i));
    }
  }
  CudaRank::CommFactory make =
      [&](const CommKey &key, const GroupPosition &pos,
          size_t scratchBytes) -> Expected<std::unique_ptr<DeviceComm>> {
    CommIdKey id{pos.instanceKey, key.stream};
    if (oneGpu)
      return local->join(id, pos.size, pos.rankInGroup, scratchBytes);
    auto found = ids.find(id);
    if (found == ids.end())
      return errorf("no NCCL id for group ", key.group, " instance ",
                    pos.instanceKey, " on stream ", key.stream);
    return createNcclComm(found->second, pos.size, pos.rankInGroup);
  };
  // Every rank's NCCL initialization waits for all the others, so the
  // ranks (of every process) first set up all that can fail alone and meet
  // at a barrier; they connect only if none failed (RankFaults.h).
  auto named = [&](size_t i, Status st) {
    return st ? st
              : errorf("rank ", held[i], " (GPU ", gpus[i], "): ",
                       st.message());
  };
  auto threads = RankThreads::start(held.size(), "the GPU rank threads");
  if (!threads)
    return threads.status();
  runner->threads_ = threads.take();
  BRAID_RETURN_IF_ERROR(setUpRanks(
      held.size(),
      [&](size_t i) { return named(i, runner->ranks_[i]->setUp()); },
      [&](size_t i, const std::atomic<bool> &stop) {
        return named(i, runner->ranks_[i]->connect(make, stop));
      },
      [&](size_t i) { runner->ranks_[i]->abort(); },
      // The test communicator's ranks wait for each other on the host.
      [&] {
        if (oneGpu)
          local->abortAll();
      },
      processes, "the GPU rank threads"));
  return runner;
}

Expected<std::vector<TensorMap>>
CudaRunner::run(const std::string &function,
                const std::vector<TensorMap> &inputs) {
  return runAssigned(std::vector<std::string>(ranks_.size(), function), inputs,
                     /*everyRankRunsIt=*/true);
}

Expected<std::vector<TensorMap>>
CudaRunner::runPerRank(const std::vector<std::string> &functions,
                       const std::vector<TensorMap> &inputs) {
  return runAssigned(functions, inputs, /*everyRankRunsIt=*/false);
}

Expected<std::vector<TensorMap>>
CudaRunner::runAssigned(const std::vector<std::string> &functions,
                        const std::vector<TensorMap> &inputs,
                        bool everyRankRunsIt) {
  size_t world = ranks_.size();
  if (inputs.size() != 1 && inputs.size() != world)
    return errorf("got inputs for ", inputs.size(), " ranks; this process runs ",
                  world);
  if (functions.size() != world)
    return errorf("got functions for ", functions.size(),
                  " ranks; this process runs ", world);
  // Checked before any rank starts (every rank holds the same plan): a
  // wrong name is not a failed step, and the runner stays usable.
  for (const std::string &function : functions)
    if (!ranks_.empty() && !ranks_[0]->hasFunction(function))
      return errorf("plan has no function '", function, "'");
  // Sends without their receives would block their streams until the
  // collective timeout. The assignment is known when this process holds
  // every rank, or through run(), whose contract is that every process runs
  // the function; a pipeline's stages spread over processes are not
  // checked (each process knows only its own).
  size_t worldSize = size_t(plan_.root().world_size());
  // Each rank's inputs too: a rank refusing its own on its thread would
  // leave its peers in collectives with it, possibly inside NCCL's
  // first-use connection, where no cancel flag reaches them.
  for (size_t r = 0; r < world; ++r) {
    int fi = plan_.functionIndex(functions[r]);
    auto bound = bindInputs(*plan_.root().functions()->Get(unsigned(fi)),
                            inputs[inputs.size() == 1 ? 0 : r]);
    if (!bound)
      return errorf("rank ", held_[r], ": ", bound.status().message());
  }
  if (checkCommunication_ && world == worldSize)
    BRAID_RETURN_IF_ERROR(matching_.check(plan_, functions));
  else if (checkCommunication_ && everyRankRunsIt && world > 0)
    BRAID_RETURN_IF_ERROR(matching_.check(
        plan_, std::vector<std::string>(worldSize, functions[0])));
  // Every rank of the step runs one function (its matched operations sit
  // at the same op index everywhere): eager launches may be paced.
  bool sameFunction =
      everyRankRunsIt ||
      (world == worldSize &&
       std::all_of(functions.begin(), functions.end(),
                   [&](const std::string &f) { return f == functions[0]; }));
  auto wallStart = std::chrono::steady_clock::now();
  std::vector<std::optional<Expected<TensorMap>>> results(world);
  std::vector<StepTiming> timings(world);
  std::atomic<bool> cancel{false};
  threads_->run([&](size_t r) {
    results[r] =
        ranks_[r]->run(functions[r], inputs[inputs.size() == 1 ? 0 : r],
                       timings[r], cancel, sameFunction);
    if (!results[r]->hasValue()) {
      cancel = true; // release ranks blocked in collectives
      // The single-GPU test mode's ranks wait for each other on the
      // host: release them too.
      if (local_)
        local_->abortAll();
      if (joint_)
        joint_->meet.abort();
    }
  });
  double wallMs = std::chrono::duration<double, std::milli>(
                      std::chrono::steady_clock::now() - wallStart)
                      .count();
  // A failed step aborts every held rank, those whose own step succeeded
  // too: their peers' communicators are aborted, and destroying theirs at
  // teardown could wait forever for them.
  for (size_t r = 0; r < world; ++r)
    if (!results[r]->hasValue()) {
      NcclAbortBatch batch; // every held rank's flags before any wait
      for (auto &rank : ranks_)
        rank->abort();
      break;
    }
  std::vector<TensorMap> out;
  // Report the root cause, not the aborts it triggered elsewhere.
  for (size_t r = 0; r < world; ++r)
    if (!results[r]->hasValue() &&
        results[r]->status().message().find("aborted: another rank") ==
            std::string::npos)
      return errorf("rank ", held_[r], ": ", results[r]->status().message());
  for (size_t r = 0; r < world; ++r) {
    if (!results[r]->hasValue())
      return errorf("rank ", held_[r], ": ", results[r]->status().message());
    out.push_back(results[r]->take());
  }
  timing_ = timings[0];
  timing_.wallMs = wallMs;
  profile_ = ranks_[0]->lastProfile();
  return out;
}

Status CudaRunner::setParameter(int rank, const std::string &name,
                                const HostTensor &local) {
  auto it = std::find(held_.begin(), held_.end(), rank);
  if (it == held_.end())
    return errorf("rank ", rank, " is not run by this process");
  return ranks_[size_t(it - held_.begin())]->setParameter(name, local);
}
