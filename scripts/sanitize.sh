#!/usr/bin/env bash
# The test suite under sanitizers, each in its own build folder (CUDA off: the host emulator
# tests still build; MPI as the Release build has it):
#
#   scripts/sanitize.sh [asan|tsan|all] [extra ctest arguments]     (default: all)
#
#   asan  every test built with AddressSanitizer + UndefinedBehaviorSanitizer (-O1 -g, UB is
#         fatal) into ${BRICKDL_ASAN_BUILD_DIR:-build-asan}, then its whole ctest except the
#         tests labelled `no_asan` (each says why in its CMakeLists.txt)
#   tsan  the CPU merged executor's tests (kernels_tests: padded / memoized with threads, the
#         plan executor, CpuMeasurer; oneDNN on one thread, its OpenMP is not instrumented) and the measuring worker processes' (process_pool_tests:
#         planted crashes, hangs and reported device losses) built with ThreadSanitizer into
#         ${BRICKDL_TSAN_BUILD_DIR:-build-tsan}, and run
#
# BRICKDL_JOBS sets the build's and ctest's parallelism (default 2). Leak reports are on; the
# only suppressions are scripts/lsan.supp's, each naming the third-party library that leaks.
# Exit status: 0 when every step passed, else 1 (`all` runs tsan after a failed asan too). The
# functions return their status explicitly: bash ignores `set -e` inside a function called
# from a `&&` / `||` list, so a failing ctest there would otherwise go unnoticed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/lib/quiet.sh
. "$root/scripts/lib/quiet.sh" # one line per configure, a compact build progress, logs
what=${1:-all}
[[ $# -gt 0 ]] && shift
jobs=${BRICKDL_JOBS:-2}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1:strict_string_checks=1:detect_stack_use_after_return=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$root/scripts/lsan.supp:print_suppressions=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# Open MPI's plug-ins stay loaded, so that leaks inside them are named (and suppressed) by
# scripts/lsan.supp rather than reported from an unknown module.
export OMPI_MCA_mca_base_component_disable_dlclose=1
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}

configure() { # build-dir sanitizers
  # shellcheck disable=SC2086 # BRICKDL_CMAKE_ARGS is split into words on purpose
  quiet_configure "$1" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g" \
    -DBRICKDL_SANITIZE="$2" -DBRICKDL_ENABLE_CUDA=OFF -DBRICKDL_BUILD_BENCHMARKS=OFF \
    ${BRICKDL_CMAKE_ARGS:-}
}

asan() {
  local build=${BRICKDL_ASAN_BUILD_DIR:-$root/build-asan}
  echo "sanitize.sh: AddressSanitizer + UndefinedBehaviorSanitizer build in $build"
  configure "$build" "address,undefined" || return 1
  quiet_build "$build" || return 1
  local rc=0
  # Left out: the MPI tests (run next), the source checks and figure scripts (nothing
  # instrumented runs), and the ONNX round trips of the six larger zoo models: the same code as
  # ResNet-50's round trip, which runs, on graphs that take 12 min more under the sanitizers.
  local skip='^TuneMpi[.]|^(clang_format|function_size|layering|figures_scripts)$'
  skip+='|OnnxRoundTrip.*/(deepcam|vgg16_bn|resnet3d_34|drn_c_26|darknet53|inception_v4) '
  (cd "$build" && ctest --output-on-failure -j"$jobs" -LE 'no_asan' -E "$skip" "$@") || rc=1
  # The MPI tests with full stacks at each allocation, which scripts/lsan.supp needs to name
  # Open MPI's leaks (its libraries have no frame pointers); too slow for the whole suite.
  (cd "$build" &&
    ASAN_OPTIONS=$ASAN_OPTIONS:fast_unwind_on_malloc=0 LSAN_OPTIONS=$LSAN_OPTIONS:fast_unwind_on_malloc=0 \
      ctest --output-on-failure -j"$jobs" -LE 'no_asan' -R '^TuneMpi[.]' "$@") || rc=1
  return $rc
}

tsan() {
  local build=${BRICKDL_TSAN_BUILD_DIR:-$root/build-tsan}
  echo "sanitize.sh: ThreadSanitizer build of the CPU merged executor's and the worker processes' tests in $build"
  configure "$build" "thread" || return 1
  quiet_build "$build" kernels_tests process_pool_tests fault_measure_worker || return 1
  # oneDNN runs on its own OpenMP threads (libgomp, not instrumented): TSan cannot see their
  # barriers and reports oneDNN's writes as races with the caller's allocation. oneDNN runs on
  # the calling thread here (OMP_NUM_THREADS=1, which the measuring workers inherit); the brick
  # kernels' threads (std::thread in this build) are the ones checked.
  OMP_NUM_THREADS=1 "$build/tests/kernels/kernels_tests" --gtest_brief=1 || return 1
  OMP_NUM_THREADS=1 "$build/tests/distributed/process_pool_tests" --gtest_brief=1 || return 1
}

case $what in
asan) asan "$@" ;;
tsan) tsan "$@" ;;
all)
  rc=0
  asan "$@" || rc=1
  tsan "$@" || rc=1
  exit $rc
  ;;
*)
  echo "usage: scripts/sanitize.sh [asan|tsan|all] [ctest arguments]" >&2
  exit 2
  ;;
esac
