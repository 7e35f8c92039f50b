# shellcheck shell=bash
# The sanitized tree, one place for its configuration: sourced by scripts/test-sanitized.sh
# (its tests) and scripts/fuzz.sh (its fuzz targets), which therefore build and use one
# tree, <repo>/build-emu:
#   - clang 14 (libFuzzer needs clang; the CUDA emulation's __half converts with F16C
#     there, kernels/cuda/emulation/half.h), Debug at -O1 with line tables;
#   - AddressSanitizer and UndefinedBehaviorSanitizer (UB is fatal), and libFuzzer's
#     coverage instrumentation (-fsanitize=fuzzer-no-link) in every object, so that the
#     fuzz targets (REMEX_FUZZ=ON: linked with -fsanitize=fuzzer) and the tests share
#     the same objects; the tests link only the sanitizers' runtimes, which define the
#     coverage callbacks as no-ops;
#   - linked by lld (lld-14), about twice as fast as the default linker on these
#     executables; remex and remex-server, which the suite starts some thousands of
#     times, not position-independent (REMEX_PROGRAM_LINK_OPTIONS=-no-pie): the loader
#     then has no 1.4 million relocations to apply at each start, about 70 ms of the
#     CLI's 270 ms (the test programs stay PIE: a fuzz target linked -no-pie reports
#     OpenMP's thread data as leaked);
#   - the test executables' own objects, and the host tooling that no fuzz target links
#     (the CLI, its tooling and results store, the client library, the farm client),
#     at -O0 and without that coverage (REMEX_TEST_COMPILE_OPTIONS and
#     REMEX_HOST_TOOLING_COMPILE_OPTIONS, CMakeLists.txt): still under both sanitizers,
#     in about half the compile time;
#   - the CUDA device on the host emulation of CUDA (REMEX_CUDA_EMULATION=ON), so every
#     CUDA kernel runs under the sanitizers without a GPU or nvcc;
#   - one CTest test per GoogleTest suite (REMEX_GTEST_PER_SUITE, cmake/RemexGTest.cmake):
#     about 250 processes instead of 1100, each paying the sanitizers' start and exit;
#     `ctest -R Suite` selects a suite, and a failure's output names the test;
#   - no Python client (its module would load the sanitizers' runtime into an
#     uninstrumented python3), no bench/, no host tooling tests, no conformance and
#     whole-model tests (scripts/test-sanitized.sh says why).
# Defines: sanitized_build (the tree), sanitized_packages (the Debian packages it needs),
# sanitized_cmake_args (for scripts/test.sh or cmake), sanitized_check_deps [--install].

sanitized_repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
sanitized_build=${REMEX_SANITIZED_BUILD_DIR:-$sanitized_repo/build-emu}
sanitized_packages=(clang-14 libclang-rt-14-dev lld-14)
sanitized_flags="-O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined"
sanitized_link="-fsanitize=address,undefined -fuse-ld=lld"
sanitized_test_options="-O0;-fno-sanitize=fuzzer-no-link"
sanitized_cmake_args=(
  -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_BUILD_TYPE=Debug
  -DREMEX_CUDA_EMULATION=ON -DREMEX_FUZZ=ON -DREMEX_PYTHON=OFF -DREMEX_BENCH=OFF -DREMEX_TOOLING_TESTS=OFF
  -DREMEX_MODEL_TESTS=OFF -DREMEX_GTEST_PER_SUITE=ON "-DREMEX_TEST_COMPILE_OPTIONS=$sanitized_test_options"
  "-DREMEX_HOST_TOOLING_COMPILE_OPTIONS=$sanitized_test_options" -DREMEX_PROGRAM_LINK_OPTIONS=-no-pie
  "-DCMAKE_CXX_FLAGS=$sanitized_flags" "-DCMAKE_C_FLAGS=$sanitized_flags"
  "-DCMAKE_EXE_LINKER_FLAGS=$sanitized_link" "-DCMAKE_SHARED_LINKER_FLAGS=$sanitized_link")

# sanitized_check_deps [--install]: exits 2 naming the packages when clang 14, libFuzzer
# or lld is missing; with --install, installs them first (apt-get, with sudo unless root).
sanitized_check_deps() {
  if [[ ${1:-} == --install ]]; then
    local missing=() p sudo=()
    for p in "${sanitized_packages[@]}"; do
      [[ $(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true) == installed ]] || missing+=("$p")
    done
    if ((${#missing[@]})); then
      ((EUID == 0)) || sudo=(sudo)
      "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update
      "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
    fi
  fi
  if ! command -v clang++-14 >/dev/null 2>&1 || [[ ! -x /usr/lib/llvm-14/bin/ld.lld ]] ||
    ! compgen -G "/usr/lib/llvm-14/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a" >/dev/null; then
    echo "the sanitized tree needs clang 14, libFuzzer and lld: apt-get install ${sanitized_packages[*]} (or pass --install-deps)" >&2
    exit 2
  fi
}
