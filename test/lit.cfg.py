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
# Plans compiled for the GPU tests (scripts/gpu/make-plans): the build's, or
# a GPU machine's bundle.
config.substitutions.append(("%gpu_plans", getattr(config, "braid_gpu_plans", "")))
# `compiler`: the MLIR tools are here (a GPU machine with only a bundle
# lacks them; tests that compile say `REQUIRES: compiler`).
if os.path.exists(os.path.join(config.braid_tools_dir, "braid-compile")):
    config.available_features.add("compiler")
config.environment["FILECHECK_OPTS"] = "--enable-var-scope --dump-input=fail"

llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.braid_tools_dir, append_path=True)

tools = ["braid-opt", "braid-import", "braid-translate", "braid-compile", "braid-run", "braid-cuda-bench", "FileCheck", "not", "count"]
llvm_config.add_tool_substitutions(tools, [config.braid_tools_dir, config.llvm_tools_dir])

# `cuda`: braid-run was built with the CUDA executor. `gpu`: a usable GPU,
# as `braid-run --probe-gpu` finds it (the same cudaDeviceAvailable check
# the gtests skip on, so lit and ctest never disagree). GPU tests say
# `REQUIRES: gpu`; the no-GPU error path says `REQUIRES: cuda` +
# `UNSUPPORTED: gpu`. BRAID_REQUIRE_GPU=1 makes a missing GPU fatal.
import shutil
import subprocess
require_gpu = os.environ.get("BRAID_REQUIRE_GPU", "") not in ("", "0")
config.environment["BRAID_REQUIRE_GPU"] = os.environ.get("BRAID_REQUIRE_GPU", "")
if getattr(config, "braid_enable_cuda", False):
    config.available_features.add("cuda")
    probe = [os.path.join(config.braid_tools_dir, "braid-run"), "--probe-gpu"]
    try:
        found = subprocess.run(probe, capture_output=True, text=True, timeout=60)
        if found.returncode == 0:
            config.available_features.add("gpu")
        elif require_gpu:
            lit_config.fatal("BRAID_REQUIRE_GPU is set but " + found.stderr.strip())
    except (OSError, subprocess.TimeoutExpired) as e:
        if require_gpu:
            lit_config.fatal("BRAID_REQUIRE_GPU is set but braid-run --probe-gpu failed: %s" % e)
elif require_gpu:
    lit_config.fatal("BRAID_REQUIRE_GPU is set but braid-run was built without CUDA")

# `transformers`: a Python with torch, safetensors and transformers 5
# (whose config format and `dtype=` the script uses) (BRAID_HF_PYTHON, else
# the one running lit) for the tests that make reference logits with
# scripts/hf_reference.py. Probed in the environment the tests run in (lit
# passes them no PYTHONPATH). CI installs none of them (torch alone is
# gigabytes), so there those tests are UNSUPPORTED.
hf_python = os.environ.get("BRAID_HF_PYTHON") or sys.executable
if os.sep in hf_python:
    hf_python = os.path.abspath(hf_python)  # the tests run elsewhere
hf_probe = ("import sys, torch, safetensors, transformers; "
            "sys.exit(int(transformers.__version__.split('.')[0]) < 5)")
try:
    found = subprocess.run([hf_python, "-c", hf_probe], capture_output=True,
                           timeout=300, env=dict(config.environment))
    if found.returncode == 0:
        config.available_features.add("transformers")
        config.substitutions.append(("%hfpython", hf_python))
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
