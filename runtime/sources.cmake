# BraidRuntime's sources, relative to runtime/. Shared by runtime/CMakeLists.txt
# and the standalone fuzz build (fuzz/CMakeLists.txt), so a new runtime file
# is listed once.
set(BRAID_RUNTIME_SOURCES
  ScheduleCheck.cpp
  PlanLoader.cpp
  CommMatching.cpp
  PlanText.cpp
  Generation.cpp
  ShardedOutput.cpp
  Interpreter.cpp
  Communicator.cpp
  Weights.cpp
  Safetensors.cpp
  ReferenceLogits.cpp
  HostTensor.cpp
  Profile.cpp
  Bootstrap.cpp
  cpu/Elementwise.cpp
  cpu/Matmul.cpp
  cpu/Norms.cpp
  cpu/Rope.cpp
  cpu/Attention.cpp
  cpu/Embedding.cpp
  cpu/Softmax.cpp
  cpu/Layout.cpp
  cpu/ShapeRules.cpp
)

# braid-run as a library (runtime/cli/CMakeLists.txt: BraidRunCommand; the
# fuzz build's braid-run-san), relative to runtime/cli/.
set(BRAID_RUN_COMMAND_SOURCES
  CommandLine.cpp
  PlanRun.cpp
  Report.cpp
  Checks.cpp
  RunInputs.cpp
  RunCommand.cpp
)

# The schedule checker alone (no FlatBuffers, no MLIR): the compiler's
# analyses link it too, so compiler and loader prove safety the same way.
set(BRAID_SCHEDULE_SOURCES ScheduleCheck.cpp)
