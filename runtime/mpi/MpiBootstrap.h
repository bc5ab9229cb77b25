//===- MpiBootstrap.h - Bootstrap a multi-process run with MPI -*- C++ -*-===//
//
// Under mpirun or srun each GPU is its own process; MPI gives the rank, the
// world size, the local rank (ranks sharing a node) and the collectives that
// hand the NCCL unique ids around. Nothing else goes through MPI: the plan's
// collectives are NCCL's.
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_RUNTIME_MPI_MPIBOOTSTRAP_H
#define BRAID_RUNTIME_MPI_MPIBOOTSTRAP_H

#include "runtime/Bootstrap.h"

#include <memory>
#include <optional>

namespace braid::rt::mpi {

/// True when a launcher started this process as one rank of several: Open
/// MPI's mpirun, a PMI/PMIx launcher (MPICH, srun) or Slurm.
bool launchedByMpiLauncher();

/// This process's rank on its node as the launcher's environment gives it
/// (Open MPI, MVAPICH2, MPICH/Intel MPI's Hydra, Slurm): known before
/// MPI_Init, when the GPU must already be chosen. Nullopt when none is set.
std::optional<int> launcherLocalRank();

/// MPI_Init and the node-local communicator. One per process; finalizes MPI
/// when destroyed.
Expected<std::unique_ptr<Bootstrap>> initialize(int *argc, char ***argv);

} // namespace braid::rt::mpi

#endif // BRAID_RUNTIME_MPI_MPIBOOTSTRAP_H
