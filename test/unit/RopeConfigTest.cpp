//===- RopeConfigTest.cpp - RoPE tables against transformers' -------------===//
//
// test/run/Inputs/golden/<config>-rope.json holds transformers' inv_freq
// buffer and attention_scaling for each golden config (make_golden.py). The
// importer resolves scaled RoPE (llama3, yarn) into the same table: it must
// match bit for bit in fp32. Unscaled RoPE keeps theta and is computed in
// double by the runtimes: within fp32 rounding of transformers' fp32 table.
//
//===----------------------------------------------------------------------===//
#include "frontend/ModelConfig.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <gtest/gtest.h>

#include <cmath>

namespace {

std::string goldenPath(const std::string &file) {
  return std::string(BRAID_SOURCE_DIR) + "/test/run/Inputs/golden/" + file;
}

struct Reference {
  std::vector<double> invFreq;
  double attentionScaling = 1.0;
};

Reference loadReference(const std::string &name) {
  auto buf = llvm::MemoryBuffer::getFile(goldenPath(name + "-rope.json"));
  EXPECT_TRUE(bool(buf)) << name;
  Reference r;
  if (!buf)
    return r;
  auto value = llvm::json::parse((*buf)->getBuffer());
  EXPECT_TRUE(bool(value)) << llvm::toString(value.takeError());
  const llvm::json::Object *obj = value->getAsObject();
  for (const llvm::json::Value &v : *obj->getArray("inv_freq"))
    r.invFreq.push_back(*v.getAsNumber());
  r.attentionScaling = *obj->getNumber("attention_scaling");
  return r;
}

class RopeAgainstTransformers : public ::testing::TestWithParam<const char *> {
};

TEST_P(RopeAgainstTransformers, SameFrequenciesAndScaling) {
  std::string name = GetParam();
  auto config = braid::loadModelConfig(goldenPath(name + ".json"));
  ASSERT_TRUE(bool(config)) << llvm::toString(config.takeError());
  Reference want = loadReference(name);
  // Partial rotary (GPT-NeoX): frequencies over the rotated dims only.
  int64_t rotary = config->rope.rotaryDim ? config->rope.rotaryDim
                                          : config->headDim;
  ASSERT_EQ(int64_t(want.invFreq.size()), rotary / 2);
  EXPECT_DOUBLE_EQ(config->rope.attentionFactor, want.attentionScaling);
  const std::vector<double> &got = config->rope.invFreq;
  if (got.empty()) {
    // Unscaled: the runtimes use theta^(-2i/D) in double.
    for (size_t i = 0; i < want.invFreq.size(); ++i) {
      double f = std::pow(config->rope.theta,
                          -2.0 * double(i) / double(rotary));
      EXPECT_NEAR(f, want.invFreq[i], 2e-7 * want.invFreq[i]) << "pair " << i;
    }
    return;
  }
  ASSERT_EQ(got.size(), want.invFreq.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_EQ(float(got[i]), float(want.invFreq[i])) << "pair " << i;
}

INSTANTIATE_TEST_SUITE_P(Golden, RopeAgainstTransformers,
                         ::testing::Values("llama31", "mistral", "qwen25-yarn",
                                           "qwen3", "neox-pythia",
                                           "neox-serial", "llama-mlpbias",
                                           "qwen2-gelu", "ministral"));

// The scaled tables really differ from the plain ones (else the test above
// could not tell a scaling that was ignored).
TEST(RopeConfig, ScaledTablesDifferFromTheta) {
  for (const char *name : {"llama31", "qwen25-yarn"}) {
    auto config = braid::loadModelConfig(goldenPath(std::string(name) + ".json"));
    ASSERT_TRUE(bool(config)) << llvm::toString(config.takeError());
    ASSERT_FALSE(config->rope.invFreq.empty()) << name;
    double maxRel = 0;
    for (size_t i = 0; i < config->rope.invFreq.size(); ++i) {
      double plain = std::pow(config->rope.theta,
                              -2.0 * double(i) / double(config->headDim));
      maxRel = std::max(maxRel,
                        std::abs(config->rope.invFreq[i] - plain) / plain);
    }
    EXPECT_GT(maxRel, 0.5) << name;
  }
}

} // namespace
