//===- GroupLayout.h - Device groups as the axes of one mesh ----*- C++ -*-===//
//
// The one rule that places device groups on world ranks, shared by the
// compiler (plan export, cost model) and the runtime (loader, executors).
// Groups form a mesh in declaration order: the first group is the innermost
// axis (stride 1), each next one strides over all the groups before it, and
// the world is the product of the sizes. An instance of a group is the set
// of ranks that differ only along its axis: base + j * stride, j < size.
//
// Header-only and dependency-free so that both sides include it as is (the
// runtime links no MLIR).
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_RUNTIME_GROUPLAYOUT_H
#define BRAID_RUNTIME_GROUPLAYOUT_H

#include <cstdint>
#include <vector>

namespace braid::rt {

/// Strides of device groups, in declaration order, and the world size.
struct MeshLayout {
  std::vector<int> strides;
  int worldSize = 1;
};

/// Lays out groups of `sizes` (declaration order) on one mesh.
inline MeshLayout meshLayout(const std::vector<int> &sizes) {
  MeshLayout mesh;
  mesh.strides.reserve(sizes.size());
  for (int size : sizes) {
    mesh.strides.push_back(mesh.worldSize);
    mesh.worldSize *= size;
  }
  return mesh;
}

/// Where a world rank sits in its instance of a group.
struct GroupPosition {
  int rankInGroup = 0;
  int size = 1;
  /// The instance's id, unique across groups and their instances.
  int64_t instanceKey = 0;
  /// World rank of member `j` of this instance.
  int memberWorldRank(int j) const { return base + j * stride; }
  int base = 0, stride = 1;
};

/// Id of the instance of group number `group` (declaration order) whose
/// member 0 is world rank `base`, in a world of `worldSize` ranks.
inline int64_t groupInstanceKey(int group, int base, int worldSize) {
  return int64_t(group) * worldSize + base;
}

/// Position of `worldRank` in group number `group` of `size` ranks at mesh
/// stride `stride`, in a world of `worldSize` ranks.
inline GroupPosition groupPosition(int group, int size, int stride,
                                   int worldSize, int worldRank) {
  GroupPosition p;
  p.size = size;
  p.stride = stride;
  p.rankInGroup = (worldRank / stride) % size;
  p.base = worldRank - p.rankInGroup * stride;
  p.instanceKey = groupInstanceKey(group, p.base, worldSize);
  return p;
}

} // namespace braid::rt

#endif // BRAID_RUNTIME_GROUPLAYOUT_H
