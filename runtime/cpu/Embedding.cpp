//===- Embedding.cpp - braid.embedding (optionally vocab-sharded) ---------===//
#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/ShapeRules.h"

using namespace braid::rt;
using namespace braid::rt::cpu;

Expected<FTensor> cpu::embedding(const ITensor &ids, const FView &table,
                                 int64_t vocabStart) {
  auto shape = checkEmbeddingShapes(ids.shape, table.shape);
  if (!shape)
    return shape.status();
  int64_t v = table.shape[0], h = table.shape[1];
  FTensor out;
  out.shape = shape.take();
  out.data.assign(size_t(numElements(out.shape)), 0.0f);
  for (size_t i = 0; i < ids.data.size(); ++i) {
    int64_t row = ids.data[i] - vocabStart;
    if (row < 0 || row >= v) {
      // Outside this shard: a zero row the all_reduce completes. Without a
      // shard it is simply an invalid id; zero keeps the op total.
      continue;
    }
    table.read(row * h, h, out.data.data() + i * size_t(h));
  }
  return out;
}
