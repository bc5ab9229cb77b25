# -*- Python -*-
import os
import sys

import lit.formats
from lit.llvm import llvm_config

config.name = "braid"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test", ".json"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.braid_obj_root, "test")
config.excludes = ["check_op_coverage.py", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "unit", "Inputs"]

config.substitutions.append(("%braid_src_root", config.braid_src_root))
config.substitutions.append(("%python", sys.executable))
config.environment["FILECHECK_OPTS"] = "--enable-var-scope --dump-input=fail"

llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.braid_tools_dir, append_path=True)

tools = ["braid-opt", "braid-import", "braid-translate", "braid-compile", "braid-run", "braid-cuda-bench", "FileCheck", "not", "count"]
llvm_config.add_tool_substitutions(tools, [config.braid_tools_dir, config.llvm_tools_dir])

# `cuda`: braid-run was built with the CUDA executor. `gpu`: a usable NVIDIA
# GPU is present (nvidia-smi lists one). GPU tests say `REQUIRES: gpu`, and
# the no-GPU error path says `REQUIRES: cuda` + `UNSUPPORTED: gpu`.
import shutil
import subprocess
if getattr(config, "braid_enable_cuda", False):
    config.available_features.add("cuda")
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            listed = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30)
            if listed.returncode == 0 and "GPU" in listed.stdout:
                config.available_features.add("gpu")
        except (OSError, subprocess.TimeoutExpired):
            pass

# `mpi`: braid-run was built with the MPI bootstrap and mpirun exists.
# %mpirun starts local processes, as root too (CI runs as root), with more
# ranks than cores allowed.
mpirun = shutil.which("mpirun")
if getattr(config, "braid_enable_mpi", False) and mpirun:
    config.available_features.add("mpi")
    config.substitutions.append(("%mpirun", mpirun + " --oversubscribe"))
    config.environment["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
    config.environment["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
    # No help-message aggregation daemon chatter in test output.
    config.environment["OMPI_MCA_orte_base_help_aggregate"] = "0"
