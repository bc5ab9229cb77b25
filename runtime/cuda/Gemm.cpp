//===- Gemm.cpp - braid.matmul through cuBLASLt ---------------------------===//
#include "runtime/cuda/Gemm.h"
#include "runtime/cuda/LibraryCheck.h"

using namespace braid::rt;
using namespace braid::rt::cuda;

Expected<GemmShape> cuda::gemmShapeOf(const Shape &a, const Shape &b,
                                      bool transA, bool transB, DType dtype) {
  if (a.size() < 2 || b.size() < 2)
    return errorf("matmul: operands need rank >= 2, got ", formatShape(a),
                  " and ", formatShape(b));
  GemmShape g;
  g.transposeA = transA;
  g.transposeB = transB;
  g.dtype = dtype;
  g.batchedB = b.size() > 2;
  for (size_t i = 0; i + 2 < a.size(); ++i)
    g.batch *= a[i];
  size_t ra = a.size(), rb = b.size();
  g.m = transA ? a[ra - 1] : a[ra - 2];
  g.k = transA ? a[ra - 2] : a[ra - 1];
  int64_t kb = transB ? b[rb - 1] : b[rb - 2];
  g.n = transB ? b[rb - 2] : b[rb - 1];
  if (kb != g.k)
    return errorf("matmul: contraction sizes differ: ", formatShape(a), " vs ",
                  formatShape(b));
  // A shared B and untransposed A: the batch is just more rows, which
  // cuBLASLt runs as one larger (faster) GEMM.
  if (!g.batchedB && !transA) {
    g.m *= g.batch;
    g.batch = 1;
  }
  return g;
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

Expected<GemmPlan> GemmPlan::create(cublasLtHandle_t handle,
                                    const GemmShape &s,
                                    size_t workspaceBytes) {
  auto plans = candidates(handle, s, workspaceBytes, 1);
  if (!plans)
    return plans.status();
  return std::move(plans->front());
}

Expected<std::vector<GemmPlan>>
GemmPlan::candidates(cublasLtHandle_t handle, const GemmShape &s,
                     size_t workspaceBytes, int count) {
  auto type = cudaTypeOf(s.dtype);
  if (!type)
    return type.status();
  if (count < 1)
    return errorf("matmul: asked for ", count, " algorithms");
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
    }
  }
  cublasLtMatmulPreference_t pref = nullptr;
  BRAID_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  uint64_t ws = workspaceBytes;
  cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
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
    plan.d_ = shared;
    plan.algo_ = results[size_t(i)].algo;
    plans.push_back(std::move(plan));
  }
  if (plans.empty())
    return errorf("matmul: cuBLASLt has no algorithm for batch ", s.batch,
                  " M=", s.m, " N=", s.n, " K=", s.k, " ", dtypeName(s.dtype));
  return plans;
}

Status GemmPlan::run(cublasLtHandle_t handle, const void *a, const void *b,
                     void *c, void *workspace, size_t workspaceBytes,
                     cudaStream_t stream, const void *bias) const {
  const float alpha = 1.0f, beta = 0.0f;
  if (shape_.bias) {
    if (!bias)
      return errorf("matmul: the fused bias epilogue has no bias");
    // A host-side descriptor field, read when the GEMM is enqueued (or
    // captured): safe to set per call.
    BRAID_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
        d_->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
  }
  BRAID_CUBLAS_CHECK(cublasLtMatmul(handle, d_->op, &alpha, b, d_->ltA, a, d_->ltB,
                                    &beta, c, d_->c, c, d_->c, &algo_,
                                    workspace, workspaceBytes, stream));
  return Status::ok();
}
