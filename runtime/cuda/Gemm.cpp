//===- Gemm.cpp - braid.matmul through cuBLASLt ---------------------------===//
#include "runtime/cuda/Gemm.h"
#include "runtime/cpu/ShapeRules.h"
#include "runtime/cuda/CudaCheck.h"
#include "runtime/cuda/LibraryCheck.h"
#include "runtime/cuda/Resources.h"

#include <cmath>

#include <limits>
#include <utility>

using namespace braid::rt;
using namespace braid::rt::cuda;

Expected<GemmShape> cuda::gemmShapeOf(const Shape &a, const Shape &b,
                                      bool transA, bool transB, DType dtype) {
  auto dims = cpu::checkMatmulShapes(a, b, transA, transB);
  if (!dims)
    return dims.status();
  GemmShape g;
  g.transposeA = transA;
  g.transposeB = transB;
  g.dtype = dtype;
  g.batchedB = dims->batchedB;
  g.batch = dims->batch;
  g.m = dims->m;
  g.n = dims->n;
  g.k = dims->k;
  // A shared B and untransposed A: the batch is just more rows, which
  // cuBLASLt runs as one larger (faster) GEMM.
  if (!g.batchedB && !transA) {
    g.m *= g.batch;
    g.batch = 1;
  }
  // cuBLASLt counts strided batches in an int32.
  if (g.batch > std::numeric_limits<int32_t>::max())
    return errorf("matmul: ", g.batch, " batches of ", formatShape(a), " x ",
                  formatShape(b), " are more than cuBLASLt runs in one call");
  return g;
}

uint32_t cuda::addressAlignment(const void *p) {
  uintptr_t address = reinterpret_cast<uintptr_t>(p);
  uint32_t align = 1;
  while (align < 256 && address % (uintptr_t(align) * 2) == 0)
    align *= 2;
  return align;
}

struct GemmPlan::Descriptors {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t ltA = nullptr; // our B
  cublasLtMatrixLayout_t ltB = nullptr; // our A
  cublasLtMatrixLayout_t c = nullptr;
  ~Descriptors() {
    if (ltA)
      cublasLtMatrixLayoutDestroy(ltA);
    if (ltB)
      cublasLtMatrixLayoutDestroy(ltB);
    if (c)
      cublasLtMatrixLayoutDestroy(c);
    if (op)
      cublasLtMatmulDescDestroy(op);
  }
};

static Expected<cudaDataType_t> cudaTypeOf(DType t) {
  switch (t) {
  case DType::BF16:
    return CUDA_R_16BF;
  case DType::F16:
    return CUDA_R_16F;
  case DType::F32:
    return CUDA_R_32F;
  default:
    return errorf("matmul: no GEMM for ", dtypeName(t));
  }
}

/// A column-major layout with an optional strided batch.
static Status makeLayout(cublasLtMatrixLayout_t *layout, cudaDataType_t type,
                         int64_t rows, int64_t cols, int64_t ld, int32_t batch,
                         int64_t stride) {
  BRAID_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(layout, type, uint64_t(rows),
                                                uint64_t(cols), ld));
  if (batch > 1) {
    BRAID_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(
        *layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof(batch)));
    BRAID_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(
        *layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
        sizeof(stride)));
  }
  return Status::ok();
}

Expected<GemmPlan> GemmPlan::create(cublasLtHandle_t handle, const GemmShape &s,
                                    size_t workspaceBytes,
                                    const GemmAlignment &align) {
  auto plans = candidates(handle, s, workspaceBytes, 1, align);
  if (!plans)
    return plans.status();
  return std::move(plans->front());
}

Expected<std::vector<GemmPlan>>
GemmPlan::candidates(cublasLtHandle_t handle, const GemmShape &s,
                     size_t workspaceBytes, int count,
                     const GemmAlignment &align) {
  auto type = cudaTypeOf(s.dtype);
  if (!type)
    return type.status();
  if (count < 1)
    return errorf("matmul: asked for ", count, " algorithms");
  // An empty GEMM is not cuBLASLt's (a zero leading dimension is invalid):
  // run() writes nothing, or zeros for K = 0. A fused epilogue would still
  // owe gelu(bias) there; the executor runs such a chain unfused.
  if (s.batch == 0 || s.m == 0 || s.n == 0 || s.k == 0) {
    if ((s.bias || s.gelu || s.residual) && s.k == 0 &&
        s.batch * s.m * s.n != 0)
      return errorf("matmul: no fused epilogue for K=0");
    GemmPlan plan;
    plan.shape_ = s;
    plan.align_ = align;
    return std::vector<GemmPlan>{plan};
  }
  auto shared = std::make_shared<Descriptors>();
  Descriptors &d = *shared;
  BRAID_CUBLAS_CHECK(
      cublasLtMatmulDescCreate(&d.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  // cuBLASLt's A is our op(B)^T, its B our op(A)^T (see the header).
  cublasOperation_t opLtA = s.transposeB ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opLtB = s.transposeA ? CUBLAS_OP_T : CUBLAS_OP_N;
  BRAID_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
      d.op, CUBLASLT_MATMUL_DESC_TRANSA, &opLtA, sizeof(opLtA)));
  BRAID_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
      d.op, CUBLASLT_MATMUL_DESC_TRANSB, &opLtB, sizeof(opLtB)));
  int32_t batch = int32_t(s.batch);
  // Our B: [K, N] row-major = col-major N x K (ld N); transposed: [N, K]
  // row-major = col-major K x N (ld K), used with OP_T.
  BRAID_RETURN_IF_ERROR(makeLayout(
      &d.ltA, *type, s.transposeB ? s.k : s.n, s.transposeB ? s.n : s.k,
      s.transposeB ? s.k : s.n, s.batchedB ? batch : 1, s.k * s.n));
  if (!s.batchedB && batch > 1) {
    // A shared B across a batch: stride 0.
    int64_t zero = 0;
    BRAID_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(
        d.ltA, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof(batch)));
    BRAID_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(
        d.ltA, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &zero, sizeof(zero)));
  }
  // Our A: [M, K] row-major = col-major K x M (ld K); transposed: [K, M]
  // row-major = col-major M x K (ld M), used with OP_T.
  BRAID_RETURN_IF_ERROR(makeLayout(
      &d.ltB, *type, s.transposeA ? s.m : s.k, s.transposeA ? s.k : s.m,
      s.transposeA ? s.m : s.k, batch, s.m * s.k));
  // C: [M, N] row-major = col-major N x M (ld N).
  BRAID_RETURN_IF_ERROR(
      makeLayout(&d.c, *type, s.n, s.m, s.n, batch, s.m * s.n));

  if (s.residual && (s.gelu || s.batch != 1))
    return errorf("matmul: a fused residual needs batch 1 and no GELU");
  if (s.bias || s.gelu) {
    if (s.batch != 1)
      return errorf("matmul: a fused bias/GELU epilogue needs batch 1, got ",
                    s.batch);
    cublasLtEpilogue_t epilogue = s.gelu && s.bias ? CUBLASLT_EPILOGUE_GELU_BIAS
                                  : s.gelu         ? CUBLASLT_EPILOGUE_GELU
                                                   : CUBLASLT_EPILOGUE_BIAS;
    BRAID_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
        d.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
    if (s.bias) {
      // cuBLASLt's D is our C^T (N x M column-major): its rows are our
      // columns, so its per-row bias is our [N] bias.
      cudaDataType_t biasType = *type;
      BRAID_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
          d.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &biasType,
          sizeof(biasType)));
      // The heuristic reads the bias pointer's value (never what it points
      // to) for its alignment: one with exactly the bias's alignment stands
      // in until run() sets the real one.
      const void *alignedAs =
          reinterpret_cast<const void *>(uintptr_t(align.bias));
      BRAID_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
          d.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &alignedAs,
          sizeof(alignedAs)));
    }
  }
  cublasLtMatmulPreference_t pref = nullptr;
  BRAID_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  uint64_t ws = workspaceBytes;
  // cuBLASLt's A is our B, its B our A; its D is our C, and its C our C
  // too (beta 0) or the residual (beta 1), laid out alike.
  std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> alignments[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align.b},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align.a},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
       s.residual ? align.residual : align.c},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align.c}};
  cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
  for (const auto &[attribute, bytes] : alignments)
    if (st == CUBLAS_STATUS_SUCCESS)
      st = cublasLtMatmulPreferenceSetAttribute(pref, attribute, &bytes,
                                                sizeof(bytes));
  std::vector<cublasLtMatmulHeuristicResult_t> results(static_cast<size_t>(count));
  int found = 0;
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmulAlgoGetHeuristic(handle, d.op, d.ltA, d.ltB, d.c, d.c,
                                        pref, count, results.data(), &found);
  cublasLtMatmulPreferenceDestroy(pref);
  BRAID_CUBLAS_CHECK(st);
  std::vector<GemmPlan> plans;
  for (int i = 0; i < found; ++i) {
    if (results[size_t(i)].state != CUBLAS_STATUS_SUCCESS)
      continue;
    GemmPlan plan;
    plan.shape_ = s;
    plan.align_ = align;
    plan.d_ = shared;
    plan.algo_ = results[size_t(i)].algo;
    plans.push_back(std::move(plan));
  }
  if (plans.empty())
    return errorf("matmul: cuBLASLt has no algorithm for batch ", s.batch,
                  " M=", s.m, " N=", s.n, " K=", s.k, " ", dtypeName(s.dtype));
  return plans;
}

Expected<GemmPlan> GemmPlan::fastest(cublasLtHandle_t handle,
                                     const GemmShape &s, size_t workspaceBytes,
                                     int count, const GemmAlignment &align,
                                     const Operands &x, void *workspace,
                                     cudaStream_t stream, int iters) {
  auto plans = candidates(handle, s, workspaceBytes, count, align);
  if (!plans)
    return plans.status();
  if (plans->size() == 1 || iters < 1)
    return std::move(plans->front());
  Event start, stop;
  BRAID_CUDA_CHECK(cudaEventCreate(start.out()));
  BRAID_CUDA_CHECK(cudaEventCreate(stop.out()));
  size_t best = 0;
  float bestMs = INFINITY;
  for (size_t i = 0; i < plans->size(); ++i) {
    const GemmPlan &p = (*plans)[i];
    auto once = [&] {
      return p.run(handle, x.a, x.b, x.c, workspace, workspaceBytes, stream,
                   x.bias, x.residual);
    };
    // An algorithm the heuristic offers may still refuse these operands:
    // it is not a candidate then. Its refusal is a host-side status;
    // nothing was enqueued, but a failed launch leaves CUDA's last error
    // set, which a later kernel's check would take for its own.
    if (!once()) {
      (void)cudaGetLastError();
      continue;
    }
    BRAID_CUDA_CHECK(cudaEventRecord(start.get(), stream));
    Status ran = Status::ok();
    for (int r = 0; r < iters && ran; ++r)
      ran = once();
    BRAID_CUDA_CHECK(cudaEventRecord(stop.get(), stream));
    BRAID_CUDA_CHECK(cudaEventSynchronize(stop.get()));
    float ms = 0;
    BRAID_CUDA_CHECK(cudaEventElapsedTime(&ms, start.get(), stop.get()));
    if (!ran)
      (void)cudaGetLastError();
    if (ran && ms < bestMs) {
      bestMs = ms;
      best = i;
    }
  }
  if (bestMs == INFINITY)
    return errorf("matmul: none of cuBLASLt's ", plans->size(),
                  " algorithms ran for batch ", s.batch, " M=", s.m, " N=", s.n,
                  " K=", s.k, " ", dtypeName(s.dtype));
  return std::move((*plans)[best]);
}

Status GemmPlan::run(cublasLtHandle_t handle, const void *a, const void *b,
                     void *c, void *workspace, size_t workspaceBytes,
                     cudaStream_t stream, const void *bias,
                     const void *residual) const {
  // The algorithm was chosen for these alignments (GemmAlignment): a less
  // aligned pointer is an error here, not a fault or a refusal inside
  // cuBLASLt.
  auto aligned = [](const char *what, const void *p,
                    uint32_t planned) -> Status {
    if (addressAlignment(p) < planned)
      return errorf("matmul: ", what, " at ", p, " is ", addressAlignment(p),
                    "-byte aligned; the GEMM was planned for ", planned);
    return Status::ok();
  };
  BRAID_RETURN_IF_ERROR(aligned("a", a, align_.a));
  BRAID_RETURN_IF_ERROR(aligned("b", b, align_.b));
  BRAID_RETURN_IF_ERROR(aligned("the result", c, align_.c));
  if (shape_.bias)
    BRAID_RETURN_IF_ERROR(aligned("the bias", bias, align_.bias));
  if (shape_.residual) {
    if (!residual)
      return errorf("matmul: the fused residual epilogue has no residual");
    BRAID_RETURN_IF_ERROR(aligned("the residual", residual, align_.residual));
  }
  if (!d_) { // an empty GEMM (candidates)
    int64_t elements = shape_.batch * shape_.m * shape_.n;
    if (elements)
      BRAID_CUDA_CHECK(cudaMemsetAsync(
          c, 0, size_t(elements) * dtypeSize(shape_.dtype), stream));
    return Status::ok();
  }
  // beta 1 adds cuBLASLt's C, the residual, to the product (a distinct
  // pointer from D, same layout); beta 0 ignores C.
  const float alpha = 1.0f, beta = shape_.residual ? 1.0f : 0.0f;
  const void *input = shape_.residual ? residual : c;
  if (shape_.bias) {
    if (!bias)
      return errorf("matmul: the fused bias epilogue has no bias");
    // A host-side descriptor field, read when the GEMM is enqueued (or
    // captured): safe to set per call.
    BRAID_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
        d_->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
  }
  BRAID_CUBLAS_CHECK(cublasLtMatmul(handle, d_->op, &alpha, b, d_->ltA, a,
                                    d_->ltB, &beta, input, d_->c, c, d_->c,
                                    &algo_, workspace, workspaceBytes, stream));
  return Status::ok();
}
