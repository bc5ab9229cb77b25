# Shared set-up for scripts/demo and scripts/test: install what is missing
# (Debian packages, idempotent and silent when present), configure once,
# build incrementally. Source it; do not run it.
set -euo pipefail

BRAID_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BRAID_BUILD="${BRAID_BUILD:-$BRAID_ROOT/build}"

BRAID_PACKAGES=(
  cmake ninja-build g++ ccache python3
  libmlir-22-dev mlir-22-tools llvm-22-dev llvm-22-tools
  libgtest-dev libgmock-dev libbenchmark-dev
  nlohmann-json3-dev
  # runtime/cli: braid-run's command line (header-only)
  libcli11-dev
  # runtime/mpi: bootstraps multi-process runs (mpirun/srun)
  libopenmpi-dev openmpi-bin
  flatbuffers-compiler libflatbuffers-dev flatbuffers-compiler-dev
  # fuzz/: clang with libFuzzer + sanitizers (the fuzzers and the ASan/UBSan
  # runtime tests); llvm-14 for llvm-symbolizer
  clang-14 libclang-rt-14-dev llvm-14
)

braid_install_deps() {
  local missing=()
  for p in "${BRAID_PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$p")
    fi
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "braid: installing ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# braid_configure DIR [CMAKE_ARGS...]: a Release build in DIR with ccache and
# warnings as errors, configured once (later calls leave it as it is).
braid_configure() {
  local dir="$1"; shift
  if [ ! -f "$dir/build.ninja" ]; then
    cmake -G Ninja -S "$BRAID_ROOT" -B "$dir" \
      -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
      -DBRAID_WERROR=ON "$@" >/dev/null
  fi
}

braid_build() {
  braid_configure "$BRAID_BUILD"
  ninja -C "$BRAID_BUILD" ${BRAID_NINJA_FLAGS:-}
}
