//===- AttentionTensorCore.cuh - Split-KV attention on tensor cores -*- CUDA
//-*-===//
//
// The split kernel's work (one block per batch, KV head, tile of query rows
// and key range; the same partials for the same combine) with the scores
// and the value sums on tensor cores: S = Q K^T and O += P V as
// mma.sync.m16n8k16 with fp32 accumulators. The split kernel spends ~300
// instructions per (row, key) on CUDA cores and was measured issue-bound on
// an H100 (docs/benchmarks.md); here a warp does 16 rows x 16 keys with
// about 100.
//
// A block has 16 query rows (a GQA group's heads for a few queries; padding
// rows are zero) and 4 warps. Each warp walks every fourth 16-key tile of
// the block's range on its own: cp.async into its own stages, ordered by
// __syncwarp only, so no warp waits for another until the end, where the
// warps' (max, sum, O) are merged through shared memory.
//
// With a KV cache and AttentionArgs::fuseCacheWrite it also does the cache
// write (one launch fewer than the split kernel's cache write, attention
// and combine): every block runs the
// cache write kernel's position check, reads the step's new rows from
// newK/newV instead of the caches, and the first row tile's block of each
// key range writes the new rows in its range into the caches.
//
// Numerics differ from the split kernel in two ways, both within the bf16
// and f16 tolerances: q is used in its storage dtype (it is stored so), and
// the probabilities P are rounded to the value dtype before P V (the sums
// use the unrounded ones), as FlashAttention does.
//
// Fragment layouts (PTX ISA, mma.m16n8k16 and ldmatrix), with g = lane / 4
// and t = lane % 4:
//   A (16 x 16, row): {(g, 2t..2t+1), (g+8, 2t..), (g, 2t+8..), (g+8, 2t+8..)}
//   B (16 x 8, col):  {(k 2t..2t+1, n g), (k 2t+8..2t+9, n g)}
//   C (16 x 8):       (g, 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1)
//   ldmatrix.x4: lane 8m + r gives row r of matrix m; lane L receives, of
//   each matrix, row L/4, columns 2(L%4)..+1 (with .trans: rows
//   2(L%4)..+1 of column L/4).
// Keys are the rows of K in memory, so K's 8 x 8 blocks are B fragments of
// S = Q K^T as loaded; V's are transposed (.trans) to be B of O += P V.
// The C fragments of two score tiles (keys 0-7, 8-15) are, element for
// element, the A fragment of P for the 16 keys.
//
// Included by Kernels.cu, inside its namespace, after the split kernel
// (AttentionLaunch, AttentionBlock, attendedKeys, firstAttendedKey,
// attentionSwizzleMask).
//
//===----------------------------------------------------------------------===//

constexpr int kTensorCoreRows = 16; // query rows per block: the mma's M
constexpr int kTensorCoreKeys = 16; // keys per warp tile: P V's mma K
constexpr int kTensorCoreWarps = kAttentionThreads / 32;

/// Head dims the tensor-core kernel is instantiated for (D % 16 == 0).
__host__ __device__ constexpr bool tensorCoreHeadDim(int64_t d) {
  return d == 16 || d == 32 || d == 64 || d == 80 || d == 96 || d == 128;
}

/// Shared memory of one block: per warp `stages` key and value tiles of 16
/// rows of D elements; the same bytes later hold the warps' results for the
/// merge, [warp][row] max and sum and [warp][row][D] outputs, fp32.
__host__ __device__ constexpr int64_t tensorCoreSmemBytes(int64_t d,
                                                          int64_t stages) {
  const int64_t tiles = kTensorCoreWarps * stages * 2 * kTensorCoreKeys * d * 2;
  const int64_t merge = kTensorCoreWarps * kTensorCoreRows * (d + 2) * 4;
  return tiles > merge ? tiles : merge;
}

template <typename T>
__device__ __forceinline__ uint32_t packPair(float x, float y);
template <>
__device__ __forceinline__ uint32_t packPair<__nv_bfloat16>(float x, float y) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(x, y); // x in the low half
  return *reinterpret_cast<const uint32_t *>(&h);
}
template <>
__device__ __forceinline__ uint32_t packPair<__half>(float x, float y) {
  const __half2 h = __floats2half2_rn(x, y);
  return *reinterpret_cast<const uint32_t *>(&h);
}

/// c += a b, m16n8k16, fp32 accumulators.
template <typename T>
__device__ __forceinline__ void mma16816(float (&c)[4], const uint32_t (&a)[4],
                                         uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (std::is_same_v<T, __nv_bfloat16>)
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0),
                   "r"(b1));
  else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0),
                   "r"(b1));
#endif
}

/// Four 8 x 8 16-bit matrices from shared memory (`row`: this lane's row).
template <bool Trans>
__device__ __forceinline__ void loadMatrices(uint32_t (&r)[4],
                                             const char *row) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned at = unsigned(__cvta_generic_to_shared(row));
  if constexpr (Trans)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 "
                 "{%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(at)
                 : "memory");
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 "
                 "{%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(at)
                 : "memory");
#endif
}

template <typename T, int D>
__global__ void __launch_bounds__(kAttentionThreads)
    attentionTensorCoreKernel(AttentionLaunch L) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  static_assert(D % 16 == 0, "head_dim must be a multiple of the mma's K");
  const AttentionArgs &a = L.a;
  if (L.fusedWrite) {
    // The cache write's position check (cacheWriteKernel's): every block
    // checks every batch, so all agree, and nothing is written when one is
    // out of range.
    const int64_t bad =
        firstBadCachePosition(a.position, a.batch, a.seq, a.keyStride);
    if (bad < a.batch) {
      if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0)
        recordBadCachePosition(a.error, a.position, bad, a.seq, a.keyStride);
      return;
    }
  }
  if (a.error && a.error->code != kDeviceErrorNone)
    return; // a cache position was out of range: the host reports it
  extern __shared__ __align__(16) char smem[];
  constexpr int kRowBytes = D * 2, kChunks = kRowBytes / 16;
  constexpr int kTileBytes = kTensorCoreKeys * kRowBytes;
  constexpr int kWarps = kTensorCoreWarps;
  const int mask = attentionSwizzleMask(kRowBytes);
  const int lane = int(threadIdx.x) & 31, warp = int(threadIdx.x) >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int stages = L.stages;
  char *mine = smem + warp * stages * 2 * kTileBytes; // [stage][key|value]
  auto stageK = [&](int s) { return mine + s * 2 * kTileBytes; };
  auto stageV = [&](int s) { return mine + s * 2 * kTileBytes + kTileBytes; };

  const AttentionBlock blk(L, kTensorCoreRows);
  const int split = blk.split, rows = blk.rows;
  const int64_t b = blk.b, kvh = blk.kvh, kBegin = blk.kBegin, kEnd = blk.kEnd;
  auto qRow = [&](int r) { return blk.qRow(a, r); };
  auto queryPos = [&](int r) { return blk.queryPos(r); };
  const int tiles =
      kEnd > kBegin
          ? int((kEnd - kBegin + kTensorCoreKeys - 1) / kTensorCoreKeys)
          : 0;
  const int myTiles = tiles > warp ? (tiles - warp + kWarps - 1) / kWarps : 0;

  const T *kp = static_cast<const T *>(a.k.data);
  const T *vp = static_cast<const T *>(a.v.data);
  const int64_t keyStep = a.kvHeads * D; // elements between keys

  // With the cache write fused in: this batch's new rows [newPos, newPos +
  // S) are read from newK/newV, never from the caches (which this launch
  // writes), and the first row tile's block of each key range writes the
  // new rows that fall in its range into the caches (through k and v), so
  // each is written once.
  const T *nkp = static_cast<const T *>(a.newK.data);
  const T *nvp = static_cast<const T *>(a.newV.data);
  const int64_t newPos = L.fusedWrite ? loadInt(a.position, b) : 0;
  auto isNew = [&](int64_t j) {
    return L.fusedWrite && j >= newPos && j - newPos < a.seq;
  };
  auto newRow = [&](int64_t j) { // element index of new row j's (b, kvh)
    return ((b * a.seq + (j - newPos)) * a.kvHeads + kvh) * D;
  };
  if (L.fusedWrite && blk.firstRow == 0) {
    const int64_t splitBegin = int64_t(split) * L.keysPerSplit;
    const int64_t lo = max(newPos, splitBegin);
    const int64_t hi = min(newPos + a.seq, splitBegin + L.keysPerSplit);
    T *kc = const_cast<T *>(kp), *vc = const_cast<T *>(vp);
    for (int64_t x = threadIdx.x; x < (hi - lo) * kChunks; x += blockDim.x) {
      const int64_t j = lo + x / kChunks, e = (x % kChunks) * 8;
      const int64_t dst = ((b * a.keyStride + j) * a.kvHeads + kvh) * D + e;
      *reinterpret_cast<uint4 *>(kc + dst) =
          *reinterpret_cast<const uint4 *>(nkp + newRow(j) + e);
      *reinterpret_cast<uint4 *>(vc + dst) =
          *reinterpret_cast<const uint4 *>(nvp + newRow(j) + e);
    }
  }
  // Copies this warp's i-th tile into stage i % stages: 16-byte cp.async
  // for keys below kEnd, zeros for the rest (P is 0 there, and 0 times a
  // stale NaN would not be).
  auto issue = [&](int i) {
    if (i < myTiles) {
      const int64_t j0 = kBegin + int64_t(warp + i * kWarps) * kTensorCoreKeys;
      const int cnt = int(min(int64_t(kTensorCoreKeys), kEnd - j0));
      const int64_t first = ((b * a.keyStride + j0) * a.kvHeads + kvh) * D;
      char *kDst = stageK(i % stages), *vDst = stageV(i % stages);
#pragma unroll
      for (int c = lane; c < kTensorCoreKeys * kChunks; c += 32) {
        const int row = c / kChunks, ch = c % kChunks;
        const int at = row * kRowBytes + ((ch ^ (row & mask)) * 16);
        if (row < cnt && isNew(j0 + row)) {
          const int64_t src = newRow(j0 + row) + ch * 8;
          __pipeline_memcpy_async(kDst + at, nkp + src, 16);
          __pipeline_memcpy_async(vDst + at, nvp + src, 16);
        } else if (row < cnt) {
          const int64_t src = first + row * keyStep + ch * 8;
          __pipeline_memcpy_async(kDst + at, kp + src, 16);
          __pipeline_memcpy_async(vDst + at, vp + src, 16);
        } else {
          *reinterpret_cast<uint4 *>(kDst + at) = make_uint4(0, 0, 0, 0);
          *reinterpret_cast<uint4 *>(vDst + at) = make_uint4(0, 0, 0, 0);
        }
      }
    }
    __pipeline_commit(); // one group per tile, empty or not
  };
  for (int s = 0; s < stages; ++s)
    issue(s);

  // This lane's two rows (g and g + 8): their query fragments, key counts
  // and softmax state. Rows past `rows` have zero queries and no keys.
  const T *qp = static_cast<const T *>(a.q.data);
  const T *q0 = g < rows ? qp + qRow(g) * D : nullptr;
  const T *q1 = g + 8 < rows ? qp + qRow(g + 8) * D : nullptr;
  auto pair = [](const T *q, int e) {
    return q ? *reinterpret_cast<const uint32_t *>(q + e) : 0u;
  };
  uint32_t qa[D / 16][4];
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    qa[kk][0] = pair(q0, 16 * kk + 2 * t);
    qa[kk][1] = pair(q1, 16 * kk + 2 * t);
    qa[kk][2] = pair(q0, 16 * kk + 2 * t + 8);
    qa[kk][3] = pair(q1, 16 * kk + 2 * t + 8);
  }
  int64_t hi[2], lo[2];
  float m[2], l[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = g + 8 * h;
    hi[h] = r < rows ? min(attendedKeys(a, b, queryPos(r)), kEnd) : 0;
    lo[h] = r < rows ? firstAttendedKey(a, attendedKeys(a, b, queryPos(r))) : 0;
    m[h] = -INFINITY;
    l[h] = 0.0f; // this lane's columns only; the quad's are added at the end
  }
  float o[D / 8][4];
#pragma unroll
  for (int n = 0; n < D / 8; ++n)
    o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;

  // Rows and chunks each lane addresses for ldmatrix: K's matrices are
  // (keys 0-7 | 8-15) x (the k-step's two chunks); V's are (keys 0-7 |
  // 8-15) x (two n-tiles' chunks).
  const int mat = lane >> 3;
  const int kKey = (mat >> 1) * 8 + (lane & 7), kHalf = mat & 1;
  const int vKey = (mat & 1) * 8 + (lane & 7), vHalf = mat >> 1;
  for (int i = 0; i < myTiles; ++i) {
    __pipeline_wait_prior(stages - 1); // this lane's copies of tile i landed
    __syncwarp();                      // and every lane's
    const char *ks = stageK(i % stages), *vs = stageV(i % stages);
    const int64_t j0 = kBegin + int64_t(warp + i * kWarps) * kTensorCoreKeys;

    float s[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t kb[4];
      const int ch = 2 * kk + kHalf;
      loadMatrices<false>(kb,
                          ks + kKey * kRowBytes + ((ch ^ (kKey & mask)) * 16));
      mma16816<T>(s[0], qa[kk], kb[0], kb[1]);
      mma16816<T>(s[1], qa[kk], kb[2], kb[3]);
    }

    // Scale and mask: element (n, e) is row g + 8 (e / 2), key
    // j0 + 8n + 2t + e % 2.
    float tileMax[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int n = 0; n < 2; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int h = e >> 1;
        const int64_t j = j0 + 8 * n + 2 * t + (e & 1);
        s[n][e] = j < hi[h] && j >= lo[h] ? s[n][e] * a.scale : -INFINITY;
        tileMax[h] = fmaxf(tileMax[h], s[n][e]);
      }
    float alpha[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      // The quad (lanes 4g..4g+3) holds row g's 16 scores.
      tileMax[h] =
          fmaxf(tileMax[h], __shfl_xor_sync(0xffffffffu, tileMax[h], 1));
      tileMax[h] =
          fmaxf(tileMax[h], __shfl_xor_sync(0xffffffffu, tileMax[h], 2));
      const float mNew = fmaxf(m[h], tileMax[h]);
      // No key seen yet (mNew = -inf): nothing to rescale or add.
      alpha[h] = mNew == -INFINITY ? 1.0f : expf(m[h] - mNew);
      float sum = 0.0f;
#pragma unroll
      for (int n = 0; n < 2; ++n)
#pragma unroll
        for (int e = 2 * h; e < 2 * h + 2; ++e) {
          s[n][e] = mNew == -INFINITY ? 0.0f : expf(s[n][e] - mNew);
          sum += s[n][e];
        }
      l[h] = l[h] * alpha[h] + sum;
      m[h] = mNew;
    }
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      o[n][0] *= alpha[0];
      o[n][1] *= alpha[0];
      o[n][2] *= alpha[1];
      o[n][3] *= alpha[1];
    }
    const uint32_t pa[4] = {
        packPair<T>(s[0][0], s[0][1]), packPair<T>(s[0][2], s[0][3]),
        packPair<T>(s[1][0], s[1][1]), packPair<T>(s[1][2], s[1][3])};
#pragma unroll
    for (int n = 0; n < D / 8; n += 2) {
      uint32_t vb[4];
      const int ch = n + vHalf;
      loadMatrices<true>(vb,
                         vs + vKey * kRowBytes + ((ch ^ (vKey & mask)) * 16));
      mma16816<T>(o[n], pa, vb[0], vb[1]);
      mma16816<T>(o[n + 1], pa, vb[2], vb[3]);
    }
    __syncwarp(); // every lane has read the stage before it is refilled
    issue(i + stages);
  }
  __pipeline_wait_prior(0);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
  }

  // Merge the warps: their stages become [warp][row] max, sum, then
  // [warp][row][D] outputs.
  __syncthreads();
  float *mW = reinterpret_cast<float *>(smem);
  float *lW = mW + kWarps * kTensorCoreRows;
  float *oW = lW + kWarps * kTensorCoreRows;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = g + 8 * h;
    if (t == 0) {
      mW[warp * kTensorCoreRows + r] = m[h];
      lW[warp * kTensorCoreRows + r] = l[h];
    }
    float *dst = oW + (warp * kTensorCoreRows + r) * D;
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      dst[8 * n + 2 * t] = o[n][2 * h];
      dst[8 * n + 2 * t + 1] = o[n][2 * h + 1];
    }
  }
  __syncthreads();
  for (int x = int(threadIdx.x); x < rows * D; x += int(blockDim.x)) {
    const int r = x / D, e = x % D;
    float mAll = -INFINITY;
    for (int w = 0; w < kWarps; ++w)
      if (lW[w * kTensorCoreRows + r] > 0.0f)
        mAll = fmaxf(mAll, mW[w * kTensorCoreRows + r]);
    float lAll = 0.0f, oAll = 0.0f;
    for (int w = 0; w < kWarps; ++w) {
      const float lw = lW[w * kTensorCoreRows + r];
      if (lw > 0.0f) {
        const float f = expf(mW[w * kTensorCoreRows + r] - mAll);
        lAll += lw * f;
        oAll += oW[(w * kTensorCoreRows + r) * D + e] * f;
      }
    }
    if (L.splits == 1) {
      store(a.o, qRow(r) * D + e, lAll > 0.0f ? oAll / lAll : 0.0f);
      continue;
    }
    // The split kernel's partial (max, sum, unnormalized output): every
    // one written, zeros for an empty range, for the same combine.
    float *part = a.partials + (qRow(r) * L.splits + split) * (D + 2);
    if (e == 0) {
      part[0] = mAll;
      part[1] = lAll;
    }
    part[2 + e] = oAll;
  }
#else
  __trap(); // launched only on sm_80 and newer (launchAttention checks)
#endif
}
