//===- RunCommand.h - braid-run as a library call ---------------*- C++ -*-===//
//
// Everything braid-run does, behind one call, so its main stays a line:
// parse the command line (runtime/cli/CommandLine.h), bootstrap the
// processes of a multi-process run (mpirun/srun, when built with MPI), load
// the plan and the weights, run prefill and greedy decode on the CPU
// interpreter or the CUDA executor (when built with it), print the
// trtexec-style summary and run the checks. Links no MLIR or LLVM.
//
//===----------------------------------------------------------------------===//
#ifndef BRAID_RUNTIME_CLI_RUNCOMMAND_H
#define BRAID_RUNTIME_CLI_RUNCOMMAND_H

namespace braid::rt {

/// Runs braid-run with its command line; returns the process exit code:
/// 0 on success (and for --help), 1 with "braid-run: error: ..." on stderr
/// otherwise. A failing rank of a multi-process run ends every process of
/// the run (Bootstrap::abortAll).
int runCommand(int argc, char **argv);

} // namespace braid::rt

#endif // BRAID_RUNTIME_CLI_RUNCOMMAND_H
