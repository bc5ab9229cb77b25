//===- GroupLayoutTest.cpp - the device-group mesh rule -------------------===//
#include "runtime/GroupLayout.h"
#include "runtime/PlanLoader.h"
#include "test/runtime/PlanTestUtil.h"

#include <gtest/gtest.h>

#include <set>

using namespace braid::rt;
namespace plan = braid::plan;

namespace {

TEST(GroupLayout, StridesFollowDeclarationOrder) {
  MeshLayout none = meshLayout({});
  EXPECT_TRUE(none.strides.empty());
  EXPECT_EQ(none.worldSize, 1);

  MeshLayout tp = meshLayout({8});
  EXPECT_EQ(tp.strides, std::vector<int>({1}));
  EXPECT_EQ(tp.worldSize, 8);

  // tp innermost, then pp over tp, then dp over both.
  MeshLayout mesh = meshLayout({4, 2, 3});
  EXPECT_EQ(mesh.strides, std::vector<int>({1, 4, 8}));
  EXPECT_EQ(mesh.worldSize, 24);
}

TEST(GroupLayout, PositionOfAWorldRank) {
  // tp 2 (stride 1) x pp 4 (stride 2): world rank 5 is tp rank 1 of {4, 5}
  // and pp rank 2 of {1, 3, 5, 7}.
  GroupPosition tp = groupPosition(/*group=*/0, 2, 1, 8, 5);
  EXPECT_EQ(tp.rankInGroup, 1);
  EXPECT_EQ(tp.size, 2);
  EXPECT_EQ(tp.memberWorldRank(0), 4);
  EXPECT_EQ(tp.memberWorldRank(1), 5);
  EXPECT_EQ(tp.instanceKey, 4);

  GroupPosition pp = groupPosition(/*group=*/1, 4, 2, 8, 5);
  EXPECT_EQ(pp.rankInGroup, 2);
  EXPECT_EQ(pp.size, 4);
  std::vector<int> members;
  for (int j = 0; j < pp.size; ++j)
    members.push_back(pp.memberWorldRank(j));
  EXPECT_EQ(members, std::vector<int>({1, 3, 5, 7}));
  EXPECT_EQ(pp.instanceKey, groupInstanceKey(1, 1, 8));
  EXPECT_EQ(pp.instanceKey, 9);
}

TEST(GroupLayout, InstancesPartitionTheWorld) {
  std::vector<std::vector<int>> meshes = {
      {8}, {2, 4}, {4, 2}, {2, 3, 2}, {1, 4, 1, 2}};
  for (const std::vector<int> &sizes : meshes) {
    MeshLayout mesh = meshLayout(sizes);
    std::set<int64_t> keys; // over all groups: instance keys never collide
    for (size_t g = 0; g < sizes.size(); ++g) {
      std::set<int64_t> groupKeys;
      for (int w = 0; w < mesh.worldSize; ++w) {
        GroupPosition p =
            groupPosition(int(g), sizes[g], mesh.strides[g], mesh.worldSize, w);
        ASSERT_EQ(p.memberWorldRank(p.rankInGroup), w);
        // Every member sees the same instance, at its own rank.
        for (int j = 0; j < p.size; ++j) {
          GroupPosition q = groupPosition(int(g), sizes[g], mesh.strides[g],
                                          mesh.worldSize, p.memberWorldRank(j));
          ASSERT_EQ(q.rankInGroup, j);
          ASSERT_EQ(q.instanceKey, p.instanceKey);
        }
        groupKeys.insert(p.instanceKey);
      }
      EXPECT_EQ(int(groupKeys.size()), mesh.worldSize / sizes[g]);
      keys.insert(groupKeys.begin(), groupKeys.end());
    }
    size_t instances = 0;
    for (int size : sizes)
      instances += size_t(mesh.worldSize / size);
    EXPECT_EQ(keys.size(), instances);
  }
}

TEST(GroupLayout, PlanGroupsUseTheSameRule) {
  MeshLayout mesh = meshLayout({2, 4});
  test::PlanBuilder pb(mesh.worldSize);
  pb.group("tp", 2, mesh.strides[0]);
  pb.group("pp", 4, mesh.strides[1]);
  std::vector<uint8_t> bytes = pb.finish();
  const plan::Plan &p = *plan::GetPlan(bytes.data());
  for (int g = 0; g < 2; ++g)
    for (int w = 0; w < mesh.worldSize; ++w) {
      GroupPosition fromPlan = groupPosition(p, g, w);
      GroupPosition fromRule =
          groupPosition(g, g ? 4 : 2, mesh.strides[g], mesh.worldSize, w);
      EXPECT_EQ(fromPlan.rankInGroup, fromRule.rankInGroup);
      EXPECT_EQ(fromPlan.instanceKey, fromRule.instanceKey);
      EXPECT_EQ(fromPlan.memberWorldRank(0), fromRule.memberWorldRank(0));
    }
}

} // namespace
