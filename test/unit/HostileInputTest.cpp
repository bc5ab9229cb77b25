//===- HostileInputTest.cpp - sizes, counts and JSON from hostile input ---===//
//
// Issue 15 on the compiler side, below the tools: every shape rule, byte
// count, FLOP count, config field and JSON file that a hostile input can
// push past int64 (or past the stack) gives a clear error instead of a
// signal or a wrapped number.
//
//===----------------------------------------------------------------------===//
#include "dialect/ShapeChecks.h"
#include "frontend/Importer.h"
#include "frontend/JsonNesting.h"
#include "frontend/ModelConfig.h"
#include "frontend/input/InputFile.h"
#include "frontend/input/MlirNesting.h"
#include "passes/InitAll.h"
#include "passes/MemoryPlan.h"
#include "passes/Pipelines.h"
#include "passes/StepStats.h"
#include "passes/cost/CostModel.h"
#include "passes/cost/Target.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <limits>
#include <string>
#include <thread>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace mlir;
using namespace mlir::braid;

namespace {
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

class HostileShapes : public ::testing::Test {
protected:
  HostileShapes()
      : handler(&ctx, [this](Diagnostic &d) {
          last = d.str();
          return success();
        }) {}

  RankedTensorType t(ArrayRef<int64_t> shape, Type element = {}) {
    return RankedTensorType::get(shape, element ? element
                                                : Builder(&ctx).getF32Type());
  }
  Location loc() { return UnknownLoc::get(&ctx); }
  bool says(StringRef text) { return StringRef(last).contains(text); }

  MLIRContext ctx;
  std::string last;
  ScopedDiagnosticHandler handler;
};
} // namespace

TEST_F(HostileShapes, TensorTypesAreWhatTheRuntimeRuns) {
  Builder b(&ctx);
  for (Type ok :
       {Type(b.getF32Type()), Type(b.getF16Type()), Type(b.getBF16Type()),
        Type(b.getI32Type()), Type(b.getI64Type())})
    EXPECT_TRUE(succeeded(checkTensorType(loc(), "op", "x", t({4}, ok))));
  for (Type bad :
       {Type(b.getIndexType()), Type(b.getF64Type()), Type(b.getI8Type()),
        Type(b.getI1Type()), Type(ComplexType::get(b.getF32Type())),
        Type(VectorType::get({4}, b.getF32Type()))}) {
    EXPECT_TRUE(failed(checkTensorType(loc(), "op", "x", t({4}, bad))));
    EXPECT_TRUE(says("is not one the runtime runs")) << last;
    // tensorBytes() used to read the bit width of these: a crash.
    EXPECT_EQ(tensorByteSize(t({4}, bad)), std::nullopt);
    EXPECT_EQ(tensorBytes(t({4}, bad)), 0);
  }
  EXPECT_TRUE(
      failed(checkTensorType(loc(), "op", "x", t({ShapedType::kDynamic}))));
  EXPECT_TRUE(failed(checkTensorType(loc(), "op", "x", b.getF32Type())));
}

TEST_F(HostileShapes, ElementCountsStopAt2To40) {
  EXPECT_EQ(tensorByteSize(t({1 << 20, 1 << 20}, Builder(&ctx).getI64Type())),
            int64_t(1) << 43);
  EXPECT_TRUE(failed(checkTensorType(loc(), "op", "x", t({1 << 21, 1 << 20}))));
  EXPECT_TRUE(says("has 2199023255552 elements; a braid tensor holds at most "
                   "2^40 = 1099511627776"))
      << last;
  // 2^32 x (2^32 + 1) wraps int64; the count is refused, not wrapped.
  EXPECT_TRUE(failed(checkTensorType(
      loc(), "op", "x", t({int64_t(1) << 32, (int64_t(1) << 32) + 1}))));
  EXPECT_TRUE(says("more elements than int64 can count")) << last;
  EXPECT_EQ(checkedNumElements({int64_t(1) << 32, (int64_t(1) << 32) + 1}),
            std::nullopt);
  EXPECT_EQ(tensorBytes(t({int64_t(1) << 32, (int64_t(1) << 32) + 1})), 0);
}

TEST_F(HostileShapes, SliceBoundsDoNotWrap) {
  // offsets + sizes = INT64_MAX + 2 wrapped negative and passed `<= dim`.
  EXPECT_TRUE(failed(checkSlice(loc(), t({4}), {kInt64Max}, {2}, t({2}))));
  EXPECT_EQ(last, "slice: dim 0 takes [9223372036854775807, "
                  "9223372036854775807 + 2) which is outside [0, 4)");
  EXPECT_TRUE(failed(checkSlice(loc(), t({8}), {int64_t(1) << 62},
                                {int64_t(1) << 62}, t({int64_t(1) << 62}))));
  EXPECT_TRUE(succeeded(checkSlice(loc(), t({8}), {6}, {2}, t({2}))));
}

TEST_F(HostileShapes, ReshapeAndConcatCountsDoNotWrap) {
  // [2^32, 2^32 + 1] has 2^64 + 2^32 elements = 2^32 in wrapped int64.
  EXPECT_TRUE(
      failed(checkReshape(loc(), t({int64_t(1) << 32, (int64_t(1) << 32) + 1}),
                          t({int64_t(1) << 32}))));
  EXPECT_TRUE(says("has more elements than int64 can count but [4294967296] "
                   "has 4294967296 elements"))
      << last;
  // Four inputs of 2^62 sum to 2^64 = 0.
  int64_t big = int64_t(1) << 62;
  EXPECT_TRUE(failed(
      checkConcat(loc(), {t({big}), t({big}), t({big}), t({big})}, 0, t({0}))));
  EXPECT_TRUE(says("concat: the sizes of the inputs in dim 0 sum past int64"))
      << last;
}

TEST_F(HostileShapes, CollectiveResultSizesDoNotWrap) {
  int64_t big = int64_t(1) << 62;
  // 2^62 x 4 = 0 in int64: a result of size 0 "matched".
  EXPECT_TRUE(
      failed(checkAllGather(loc(), "all_gather", t({big}), t({0}), 0, 4)));
  EXPECT_TRUE(says("all_gather: dim 0 of size 4611686018427387904 x group "
                   "size 4 overflows int64"))
      << last;
  EXPECT_TRUE(failed(
      checkAllToAll(loc(), "all_to_all", t({4, big}), t({1, 0}), 0, 1, 4)));
  EXPECT_TRUE(says("concat_dim 1 of size 4611686018427387904 x group size 4 "
                   "overflows int64"))
      << last;
}

TEST_F(HostileShapes, ParameterShardsTimesBlocksDoesNotDivideByZero) {
  // shards x blocks = 2^62 x 4 = 0 in int64: `dim % 0` was a SIGFPE.
  int64_t big = int64_t(1) << 62;
  EXPECT_TRUE(failed(checkParameter(loc(), "w", {8}, {}, t({2}), 0,
                                    /*groupSize=*/big, /*shards=*/big,
                                    /*blocks=*/4)));
  EXPECT_TRUE(says("parameter 'w': dim 0 of size 8 is not divisible by "
                   "shards x blocks = 4611686018427387904 x 4"))
      << last;
  EXPECT_TRUE(failed(
      checkParameter(loc(), "w", {8}, {}, t({2}), 0, 4, 4, int64_t(1) << 31)));
  EXPECT_TRUE(says("blocks 2147483648 must be in [1, 2147483647]")) << last;
  EXPECT_TRUE(failed(checkParameter(loc(), "w",
                                    {int64_t(1) << 32, (int64_t(1) << 32) + 1},
                                    {}, t({4, 4}), std::nullopt, 1, 1, 1)));
  EXPECT_TRUE(says("full shape [4294967296, 4294967297] has more elements "
                   "than int64 can count"))
      << last;
}

TEST_F(HostileShapes, GroupsAndTheMeshFitThePlan) {
  EXPECT_TRUE(succeeded(checkGroupSize(loc(), "tp", kMaxWorldSize)));
  EXPECT_TRUE(failed(checkGroupSize(loc(), "tp", (int64_t(1) << 32) + 2)));
  EXPECT_EQ(last, "device_group @tp: size must be in [1, 1048576], got "
                  "4294967298");
  EXPECT_TRUE(failed(checkGroupSize(loc(), "tp", 0)));
  EXPECT_TRUE(succeeded(checkMesh(loc(), {"tp", "dp"}, {1024, 1024})));
  EXPECT_TRUE(failed(checkMesh(loc(), {"tp", "dp"}, {1024, 2048})));
  EXPECT_EQ(last, "device_group @dp: the mesh of device groups @tp x @dp = "
                  "1024 x 2048 = 2097152 ranks exceeds the maximum world "
                  "size 1048576");
  EXPECT_TRUE(failed(
      checkMesh(loc(), {"a", "b"}, {int64_t(1) << 62, int64_t(1) << 62})));
  EXPECT_TRUE(says("more than int64 can count ranks")) << last;
}

//===----------------------------------------------------------------------===//
// Step statistics and the cost model
//===----------------------------------------------------------------------===//

namespace {
// Each matmul is 2 x 2^40 x 2^20 = 2^61 FLOPs: four of them are 2^63.
constexpr const char *kFlopModule = R"mlir(
func.func @big(%a: tensor<1048576x1048576xbf16>) {
  %0 = braid.matmul %a, %a : (tensor<1048576x1048576xbf16>, tensor<1048576x1048576xbf16>) -> tensor<1048576x1048576xbf16>
  %1 = braid.matmul %a, %a : (tensor<1048576x1048576xbf16>, tensor<1048576x1048576xbf16>) -> tensor<1048576x1048576xbf16>
  %2 = braid.matmul %a, %a : (tensor<1048576x1048576xbf16>, tensor<1048576x1048576xbf16>) -> tensor<1048576x1048576xbf16>
  return
}
func.func @bigger(%a: tensor<1048576x1048576xbf16>) {
  %0 = braid.matmul %a, %a : (tensor<1048576x1048576xbf16>, tensor<1048576x1048576xbf16>) -> tensor<1048576x1048576xbf16>
  %1 = braid.matmul %a, %a : (tensor<1048576x1048576xbf16>, tensor<1048576x1048576xbf16>) -> tensor<1048576x1048576xbf16>
  %2 = braid.matmul %a, %a : (tensor<1048576x1048576xbf16>, tensor<1048576x1048576xbf16>) -> tensor<1048576x1048576xbf16>
  %3 = braid.matmul %a, %a : (tensor<1048576x1048576xbf16>, tensor<1048576x1048576xbf16>) -> tensor<1048576x1048576xbf16>
  return
}
func.func @attention(%q: tensor<2x7x4x8xf32>, %kv: tensor<2x7x2x8xf32>, %long: tensor<1x2147483648x1x1xf32>) {
  %0 = braid.attention %q, %kv, %kv {causal, num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64} : (tensor<2x7x4x8xf32>, tensor<2x7x2x8xf32>, tensor<2x7x2x8xf32>) -> tensor<2x7x4x8xf32>
  %1 = braid.attention %q, %kv, %kv {num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 8 : i64} : (tensor<2x7x4x8xf32>, tensor<2x7x2x8xf32>, tensor<2x7x2x8xf32>) -> tensor<2x7x4x8xf32>
  %2 = braid.attention %long, %long, %long {num_heads = 1 : i64, num_kv_heads = 1 : i64, head_dim = 1 : i64} : (tensor<1x2147483648x1x1xf32>, tensor<1x2147483648x1x1xf32>, tensor<1x2147483648x1x1xf32>) -> tensor<1x2147483648x1x1xf32>
  return
}
)mlir";

class HostileStats : public ::testing::Test {
protected:
  void SetUp() override {
    DialectRegistry registry;
    ::braid::registerAllDialects(registry);
    ctx.appendDialectRegistry(registry);
    module = parseSourceString<ModuleOp>(kFlopModule, &ctx);
    ASSERT_TRUE(module);
  }
  func::FuncOp function(StringRef name) {
    return module->lookupSymbol<func::FuncOp>(name);
  }
  MLIRContext ctx;
  OwningOpRef<ModuleOp> module;
};
} // namespace

TEST_F(HostileStats, FlopTotalsPastInt64AreAnError) {
  auto fits = computeStepStats(function("big"));
  ASSERT_TRUE(bool(fits)) << llvm::toString(fits.takeError());
  EXPECT_EQ(fits->matmulFlops, 3 * (int64_t(1) << 61));
  EXPECT_EQ(fits->totalFlops(), 3 * (int64_t(1) << 61));

  // Four wrapped to INT64_MIN: printed as a negative number before.
  auto wraps = computeStepStats(function("bigger"));
  ASSERT_FALSE(bool(wraps));
  EXPECT_EQ(llvm::toString(wraps.takeError()),
            "@bigger: the matmul FLOPs of one step exceed int64 "
            "(9223372036854775807); the statistics would be wrong");
}

TEST_F(HostileStats, AttentionFlopsInClosedForm) {
  SmallVector<AttentionOp> ops;
  function("attention").walk([&](AttentionOp a) { ops.push_back(a); });
  ASSERT_EQ(ops.size(), 3u);
  // The former loop: keys = sum over 7 queries of (i + 1) or 7.
  int64_t causalKeys = 0, fullKeys = 0;
  for (int64_t i = 0; i < 7; ++i) {
    causalKeys += i + 1;
    fullKeys += 7;
  }
  EXPECT_EQ(attentionFlopCount(ops[0]), 4 * 2 * 4 * 8 * causalKeys);
  EXPECT_EQ(attentionFlopCount(ops[1]), 4 * 2 * 4 * 8 * fullKeys);
  EXPECT_EQ(attentionFlops(ops[0]), double(4 * 2 * 4 * 8 * causalKeys));
  // 2^31 queries over 2^31 keys: 2^62 keys x 4 overflow (and the loop that
  // ran once per query is gone).
  EXPECT_EQ(attentionFlopCount(ops[2]), std::nullopt);
  EXPECT_DOUBLE_EQ(attentionFlops(ops[2]), std::ldexp(1.0, 64));
}

TEST(HostileTarget, NestingAndWorldSizeAreBounded) {
  std::string deep =
      "{\"name\": " + std::string(40000, '[') + std::string(40000, ']') + "}";
  auto t = ::braid::cost::parseTarget(deep, "deep.json");
  ASSERT_FALSE(bool(t));
  EXPECT_EQ(llvm::toString(t.takeError()),
            "deep.json:1:73: JSON nests arrays and objects deeper than 64 "
            "levels");
  auto preset = ::braid::cost::resolveTarget("h100-sxm-x8");
  ASSERT_TRUE(bool(preset)) << llvm::toString(preset.takeError());
}

//===----------------------------------------------------------------------===//
// JSON nesting and config bounds
//===----------------------------------------------------------------------===//

TEST(JsonNesting, CountsBracketsOutsideStrings) {
  EXPECT_FALSE(bool(::braid::checkJsonNesting("[[[]]]", "x", 3)));
  llvm::Error e = ::braid::checkJsonNesting("[\n [[[]]]]", "x", 3);
  ASSERT_TRUE(bool(e));
  EXPECT_EQ(llvm::toString(std::move(e)),
            "x:2:4: JSON nests arrays and objects deeper than 3 levels");
  // Brackets in strings, escaped quotes included, are text.
  EXPECT_FALSE(bool(
      ::braid::checkJsonNesting(R"({"a": "[[[[\"{{{{", "b": [1]})", "x", 2)));
  // Unbalanced closers never go below zero (the parser reports them).
  EXPECT_FALSE(bool(::braid::checkJsonNesting("]]]]][[", "x", 2)));
}

TEST(HostileConfig, SizesHaveStatedBounds) {
  auto parse = [](std::string fields) {
    return ::braid::parseModelConfig(
        R"({"model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
            "num_attention_heads": 8, "num_key_value_heads": 4,
            "vocab_size": 256, "max_position_embeddings": 128,
            "rms_norm_eps": 1e-5, )" +
            fields + "}",
        "c.json");
  };
  auto ok = parse(R"("num_hidden_layers": 1024)");
  ASSERT_TRUE(bool(ok)) << llvm::toString(ok.takeError());
  auto layers = parse(R"("num_hidden_layers": 1000000000000)");
  ASSERT_FALSE(bool(layers));
  EXPECT_EQ(llvm::toString(layers.takeError()),
            "c.json: field 'num_hidden_layers' is 1000000000000; Braid "
            "imports at most 1024 (see docs/frontend.md)");
  std::string deep =
      "{\"x\": " + std::string(40000, '[') + std::string(40000, ']') + "}";
  auto nested = ::braid::parseModelConfig(deep, "c.json");
  ASSERT_FALSE(bool(nested));
  EXPECT_EQ(llvm::toString(nested.takeError()),
            "c.json:1:70: JSON nests arrays and objects deeper than 64 levels");
}

TEST(HostileConfig, ImportOptionsAndProductsAreBounded) {
  auto config = ::braid::parseModelConfig(
      R"({"model_type": "llama", "hidden_size": 131072,
          "intermediate_size": 128, "num_hidden_layers": 1,
          "num_attention_heads": 16, "num_key_value_heads": 16,
          "vocab_size": 256, "max_position_embeddings": 128,
          "rms_norm_eps": 1e-5})",
      "c.json");
  ASSERT_TRUE(bool(config)) << llvm::toString(config.takeError());
  MLIRContext ctx;
  ::braid::ImportOptions o;
  o.seq = 16;
  o.batch = std::numeric_limits<int64_t>::max();
  auto batch = ::braid::importModel(ctx, *config, o);
  ASSERT_FALSE(bool(batch));
  EXPECT_EQ(llvm::toString(batch.takeError()),
            "--batch 9223372036854775807 exceeds 1048576 sequences (see "
            "docs/frontend.md)");
  o.batch = 1 << 20;
  auto product = ::braid::importModel(ctx, *config, o);
  ASSERT_FALSE(bool(product));
  EXPECT_EQ(llvm::toString(product.takeError()),
            "the hidden states [--batch 1048576 x --seq 16 x hidden_size "
            "131072] has 2199023255552 elements; a braid tensor holds at most "
            "1099511627776 (2^40): lower one of these sizes");
  o.batch = 2;
  auto fine = ::braid::importModel(ctx, *config, o);
  ASSERT_TRUE(bool(fine)) << llvm::toString(fine.takeError());
}

namespace {
/// The tiny LLaMA's config and a context to import it into.
class TinyImport : public testing::Test {
protected:
  void SetUp() override {
    ::braid::registerAllDialects(registry);
    ctx.appendDialectRegistry(registry);
    auto parsed =
        ::braid::parseModelConfig(::braid::tinyLlamaConfigJson(), "t.json");
    ASSERT_TRUE(bool(parsed)) << llvm::toString(parsed.takeError());
    config = std::move(*parsed);
  }
  DialectRegistry registry;
  MLIRContext ctx;
  ::braid::ModelConfig config;
};
} // namespace

// A caller that changes numLayers after loading must resize the per-layer
// lists: the importer says so instead of reading past them.
TEST_F(TinyImport, ImporterRefusesPerLayerListsOfAnotherLength) {
  ::braid::ImportOptions o;
  o.seq = 4;
  o.maxSeq = 8;
  int64_t layers = config.numLayers;
  config.numLayers = layers * 4;
  auto longer = ::braid::importModel(ctx, config, o);
  ASSERT_FALSE(bool(longer));
  EXPECT_EQ(llvm::toString(longer.takeError()),
            "internal error: the config has " + std::to_string(layers) +
                " per-layer attention windows for " +
                std::to_string(layers * 4) + " layers");
  config.layerWindow.assign(size_t(layers * 4), 0);
  auto resized = ::braid::importModel(ctx, config, o);
  ASSERT_TRUE(bool(resized)) << llvm::toString(resized.takeError());
}

// With prefill buckets, ImportOptions::seq is the longest prompt the plan
// must serve: the importer itself refuses one no bucket holds, for callers
// that fill the options without the command line.
TEST_F(TinyImport, ImporterRefusesASeqLongerThanEveryBucket) {
  ::braid::ImportOptions o;
  o.maxSeq = 16;
  o.prefillBuckets = {4, 8};
  o.seq = 9;
  auto longer = ::braid::importModel(ctx, config, o);
  ASSERT_FALSE(bool(longer));
  EXPECT_NE(llvm::toString(longer.takeError())
                .find("--seq 9 is longer than the largest --prefill-buckets "
                      "entry 8"),
            std::string::npos);
  o.seq = 8;
  auto fits = ::braid::importModel(ctx, config, o);
  ASSERT_TRUE(bool(fits)) << llvm::toString(fits.takeError());
}

//===----------------------------------------------------------------------===//
// Tool input files: size, type and MLIR nesting
//===----------------------------------------------------------------------===//

namespace {
// The error of `e`, or "" when there is none.
template <typename T> std::string errorOf(llvm::Expected<T> e) {
  return e ? std::string() : llvm::toString(e.takeError());
}
std::string errorOf(llvm::Error e) {
  return e ? llvm::toString(std::move(e)) : std::string();
}
std::string nestingError(llvm::StringRef text, unsigned limit) {
  return errorOf(::braid::checkMlirNesting(text, "t.mlir", limit));
}
std::string tempFile(const std::string &suffix, const std::string &bytes) {
  const auto *info = testing::UnitTest::GetInstance()->current_test_info();
  std::string path = testing::TempDir() + "braid_" + info->name() + suffix;
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  return path;
}
} // namespace

TEST(MlirNesting, CountsBracketsOutsideStringsAndComments) {
  EXPECT_EQ(nestingError("[[[]]] {(<>)}", 3), "");
  EXPECT_EQ(nestingError("module {\n  x = [[[[]]]]\n}", 4),
            "t.mlir:2:10: MLIR text nests deeper than 4 levels (brackets, "
            "alias uses and affine operators); MLIR's parser recurses once "
            "per level");
  // Strings (escaped quotes too) and comments are text.
  EXPECT_EQ(nestingError(R"(["[[[[\"[[[[" // [[[[ "
                              [1]])",
                         2),
            "");
  // An unterminated string ends at the line end, as MLIR's lexer ends it.
  EXPECT_NE(nestingError("\"abc\n[[[", 2), "");
  // Closers never go below zero (the parser reports them).
  EXPECT_EQ(nestingError("]]]]]]}}})))>>>[[", 2), "");
}

TEST(MlirNesting, ArrowsAndComparisonsCloseNothing) {
  // Were `->` or `>=` a closing `>`, the last `[` would be level 2.
  EXPECT_NE(nestingError("[[ -> [", 2), "");
  EXPECT_NE(nestingError("[[ d0 >= 0 [", 2), "");
  EXPECT_NE(nestingError("[[ d0 > = 0 [", 2), "");
  EXPECT_EQ(nestingError("affine_map<(d0) -> (d0)> tensor<4xf32>", 2), "");
}

TEST(MlirNesting, AffineOperatorsAndUnaryMinusRunsAreLevels) {
  // MLIR's affine parser recurses once per operator of an expression.
  EXPECT_EQ(nestingError("(d0 + d0 + d0)", 3), "");
  EXPECT_NE(nestingError("(d0 + d0 + d0 + d0)", 3), "");
  EXPECT_NE(nestingError("(d0 - d0 * 2 floordiv 2)", 3), "");
  EXPECT_NE(nestingError("(d0 ceildiv 2 mod 3 - 1)", 3), "");
  EXPECT_NE(nestingError("(- - -d0)", 3), "");
  EXPECT_NE(nestingError("(----d0)", 3), "");
  // A `,` ends an expression; signs of numbers are no operators.
  EXPECT_EQ(nestingError("(d0 + 1, d0 + 1, d0 - 1, d0 * 2)", 2), "");
  std::string floats = "dense<[";
  for (int i = 0; i < 2000; ++i)
    floats += "1.000000e+00, -2.5E-05, -3, ";
  EXPECT_EQ(nestingError(floats + "0]>", 3), "");
  // Names are not keywords.
  EXPECT_EQ(nestingError("(%mod, @mod, ^mod, %x - %y)", 2), "");
}

TEST(MlirNesting, AliasUsesReachTheirDefinitionsLevels) {
  std::string chain = "#a0 = [1]\n#a1 = [#a0]\n#a2 =\n  [#a1]\n"
                      "!t = tuple<i32>\n"
                      "module attributes {t.x = #a2, t.y = !t} {}\n";
  EXPECT_EQ(nestingError(chain, 4), "");
  EXPECT_EQ(nestingError(chain, 3).substr(0, 12), "t.mlir:6:26:");
  // A definition's value may continue on the next line; an operation
  // after it is not part of it.
  std::string typed = "#a = [[1]]\n#b = dense<1>\n  : tensor<1xi32, #a>\n"
                      "module attributes {t.x = #b} {}\n";
  EXPECT_EQ(nestingError(typed, 4), "");
  EXPECT_NE(nestingError(typed, 3), "");
  std::string after = "#a = [1]\nmodule {\n  \"t.op\"() {x = [[[#a]]]} : () "
                      "-> ()\n}\nmodule attributes {t.x = #a} {}\n";
  EXPECT_EQ(nestingError(after, 6), "");
}

TEST(MlirNesting, BytecodeIsRecognized) {
  EXPECT_TRUE(::braid::isMlirBytecode(llvm::StringRef("ML\xEFR\x06[[[[", 9)));
  EXPECT_FALSE(::braid::isMlirBytecode("module {}"));
}

// Real IR is far from the bound: every test input and the IR the default
// pipeline makes.
TEST(MlirNesting, TestInputsAndCompiledIRNestLittle) {
  // Reproducers that must be refused are the exception.
  const llvm::StringRef deepOnPurpose[] = {"nested-attribute-20000.mlir"};
  uint64_t deepest = 0;
  std::string deepestFile;
  int files = 0;
  for (const char *dir : {"/test", "/models", "/fuzz/campaign"}) {
    std::error_code ec;
    for (llvm::sys::fs::recursive_directory_iterator
             it(std::string(BRAID_SOURCE_DIR) + dir, ec),
         end;
         it != end && !ec; it.increment(ec)) {
      llvm::StringRef path = it->path();
      if (!path.ends_with(".mlir") ||
          llvm::is_contained(deepOnPurpose, llvm::sys::path::filename(path)))
        continue;
      auto buffer = llvm::MemoryBuffer::getFile(path);
      ASSERT_TRUE(bool(buffer)) << path.str();
      uint64_t depth =
          ::braid::scanMlirNesting((*buffer)->getBuffer()).maxDepth;
      ++files;
      if (depth > deepest) {
        deepest = depth;
        deepestFile = path.str();
      }
    }
  }
  EXPECT_GE(files, 15);
  EXPECT_LE(deepest, 32u) << deepestFile;

  DialectRegistry registry;
  ::braid::registerAllDialects(registry);
  MLIRContext ctx(registry);
  auto config = ::braid::parseModelConfig(::braid::tinyLlamaConfigJson(), "t");
  ASSERT_TRUE(bool(config)) << llvm::toString(config.takeError());
  ::braid::ImportOptions o;
  o.tp = 2;
  o.seq = 8;
  o.maxSeq = 16;
  auto module = ::braid::importModel(ctx, *config, o);
  ASSERT_TRUE(bool(module)) << llvm::toString(module.takeError());
  PassManager pm(&ctx);
  ::braid::buildDefaultPipeline(pm);
  ASSERT_TRUE(succeeded(pm.run(**module)));
  std::string text;
  llvm::raw_string_ostream os(text);
  OpPrintingFlags flags;
  flags.enableDebugInfo();
  (**module)->print(os, flags);
  EXPECT_LE(::braid::scanMlirNesting(text).maxDepth, 16u);
}

TEST(InputFile, DevicesAndDirectoriesAreRefusedByType) {
  EXPECT_EQ(errorOf(::braid::readInputFile("/dev/zero", 1 << 20, "input")),
            "input '/dev/zero' is a device, not a file");
  EXPECT_EQ(errorOf(::braid::readInputFile("/", 1 << 20, "config")),
            "config '/' is a directory, not a file");
  EXPECT_EQ(errorOf(::braid::readInputFile("/nonexistent/x", 1, "input")),
            "cannot read input '/nonexistent/x': No such file or directory");
}

TEST(InputFile, SizeIsBoundedBeforeReading) {
  std::string path = tempFile(".mlir", std::string(1000, ' '));
  auto fits = ::braid::readInputFile(path, 1000, "input");
  ASSERT_TRUE(bool(fits)) << llvm::toString(fits.takeError());
  EXPECT_EQ((*fits)->getBufferSize(), 1000u);
  EXPECT_EQ((*fits)->getBufferEnd()[0], '\0');
  EXPECT_EQ(errorOf(::braid::readInputFile(path, 999, "input")),
            "input '" + path +
                "' is 1000 bytes, more than the limit of 999 bytes");
  EXPECT_EQ(::braid::kMaxIrInputBytes, uint64_t(1) << 30);
  EXPECT_EQ(::braid::kMaxConfigBytes, uint64_t(16) << 20);
}

// A pipe is read as a stream (`braid-import <(...)`), bounded as stdin is.
TEST(InputFile, PipesAreReadUpToTheBound) {
  const auto *info = testing::UnitTest::GetInstance()->current_test_info();
  std::string fifo = testing::TempDir() + "braid_" + info->name() + ".fifo";
  for (size_t bytes : {size_t(100), size_t(101)}) {
    std::remove(fifo.c_str());
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    // Fewer bytes than a pipe holds: the writer never blocks, and it is
    // done before the reader may stop reading.
    std::thread writer([&] {
      int fd = ::open(fifo.c_str(), O_WRONLY);
      ASSERT_GE(fd, 0);
      std::string data(bytes, 'x');
      EXPECT_EQ(::write(fd, data.data(), data.size()), ssize_t(bytes));
      ::close(fd);
    });
    auto read = ::braid::readInputFile(fifo, 100, "input");
    writer.join();
    if (bytes == 100) {
      ASSERT_TRUE(bool(read)) << llvm::toString(read.takeError());
      EXPECT_EQ((*read)->getBuffer(), std::string(100, 'x'));
    } else {
      EXPECT_EQ(errorOf(std::move(read)),
                "input '" + fifo + "' holds more than the limit of 100 bytes");
    }
  }
  std::remove(fifo.c_str());
}

TEST(InputFile, MlirInputsAreCheckedForNesting) {
  std::string deep =
      tempFile(".mlir", "module attributes {t.x = " + std::string(5000, '[') +
                            std::string(5000, ']') + "} {}\n");
  EXPECT_EQ(
      errorOf(::braid::readMlirInputFile(deep)).substr(0, deep.size() + 8),
      deep + ":1:1025:");
  // Bytecode is left to its reader.
  std::string bytecode =
      tempFile(".mlirbc", std::string("ML\xEFR", 4) + std::string(5000, '['));
  EXPECT_EQ(errorOf(::braid::readMlirInputFile(bytecode)), "");
}

TEST(HostileConfig, ConfigFilesAreReadBounded) {
  EXPECT_EQ(errorOf(::braid::loadModelConfig("/dev/zero")),
            "config '/dev/zero' is a device, not a file");
  std::string big = tempFile(".json", "");
  ASSERT_EQ(::truncate(big.c_str(), off_t(::braid::kMaxConfigBytes + 1)), 0);
  EXPECT_EQ(errorOf(::braid::loadModelConfig(big)),
            "config '" + big +
                "' is 16777217 bytes, more than the limit of 16777216 bytes "
                "(16 MiB)");
}
