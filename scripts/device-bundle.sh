#!/usr/bin/env bash
# Builds the device bundle: everything a lent GPU machine needs to run brickdl's device checks
# without building anything there (it has no package registry and none of our -dev packages).
#
#   scripts/device-bundle.sh [--no-precompile] DIR
#   scripts/device-bundle.sh [--no-precompile] --from-build BUILD DIR
#
# 1. builds the programs the device run needs in ${BRICKDL_BUNDLE_BUILD_DIR:-build-bundle}:
#    Release, CUDA for sm_80 and sm_90, without MPI (a single-process tuner needs none of Open
#    MPI's libraries, which would also raise the glibc it needs to 2.36); --from-build packs
#    what an existing build BUILD already holds instead (the dry-run test packs build/);
# 2. copies them, stripped, to DIR/bin: brickdl-tune, brickdl-query, brickdl-device,
#    cuda_device_tests, cuda_toolkit_tests, gpu_bench, and brickdl-calibrate when the build
#    has it (run.sh skips its stage, saying so, when the bundle lacks it);
# 3. copies the shared libraries they load that a bare machine may lack to DIR/lib (ldd's
#    closure, less the base system of DIR/system-libs.txt and the GPU libraries), and Debian's
#    libstdc++ / libgcc_s to DIR/lib/fallback (used only if the machine's are too old);
# 4. lists the GPU libraries (NVRTC, cuDNN, CUPTI and the companions they open at run time)
#    in DIR/gpu-libs.txt: they are NOT bundled; DIR/run.sh finds them on the machine (CUDA
#    toolkit folders, then Python site-packages, then the linker cache);
# 5. copies the experiments, the framework baselines, the summary script and the store's
#    schema, DIR/run.sh (scripts/device/run.sh) and a MANIFEST.txt (revision, sizes, sums);
# 6. compiles the generated kernels of the run's experiments (brickdl-precompile) and of the
#    device tests that compare kernels with a reference (cuda_device_test_kernels, the cases of
#    tests/device/device_cases.h) and brickdl-calibrate's convs (--precompile) for the H200's
#    sm_90a (scripts/device/precompile.sh: fails on a ptxas advisory, C75xx, or a 128+ byte stack)
#    into DIR/nvrtc-cache.tar.xz, which
#    run.sh unpacks as its NVRTC cache: the GPU's minutes go to measuring and testing, not to
#    NVRTC (--no-precompile leaves it out). MANIFEST.txt records the NVRTC that compiled them
#    and the architecture ("nvrtc-cache: NVRTC 13.0 sm_90a N kernels S s each"): their keys hold
#    both, and run.sh says whether they match the machine's. xz, not gzip: 2.4 MB where gzip
#    took 5.8 MB of the room (89 cubins, 27 MB unpacked); the device tests' 62 kernels add
#    9.4 MB unpacked, 0.96 MB in xz alone, and took 105 s to compile on 2 busy cores (40 s of CPU).
#
# What travels must fit: the device tool sends the checkout's working tree (tracked and
# untracked-not-ignored files, about 42 MiB, most of it the committed result set's database)
# and the carried bundle together, 64 MiB at most (scripts/lib/travel.sh counts it as the tool
# does). So the bundle's programs and libraries travel packed (programs.tar.xz, about 9 MB for
# their 34 MB), which run.sh unpacks first; the script refuses, before building, a tree that
# leaves no room, and after packing a bundle that does not fit beside the tree, naming the
# largest files; it prints what travels and what is left, which a rerun after filing results
# (scripts/device/file-results.sh: up to an 8 MiB database) needs.
# Exit status: 0 done; 1 the build failed or what travels is too large; 2 bad usage.
set -euo pipefail

usage() { echo "usage: $0 [--no-precompile] [--from-build BUILD] DIR" >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/lib/travel.sh
. "$root/scripts/lib/travel.sh"
precompile=1
if [ "${1:-}" = --no-precompile ]; then precompile=0; shift; fi
build_it=1
build=${BRICKDL_BUNDLE_BUILD_DIR:-$root/build-bundle}
if [ "${1:-}" = --from-build ]; then
  [ $# -eq 3 ] || usage
  build_it=0
  build=$2
  shift 2
fi
[ $# -eq 1 ] || usage
dir=$1
limit=$(travel_limit_bytes)
programs=(apps/brickdl-tune apps/brickdl-query apps/brickdl-device tests/device/cuda_device_tests
  tests/device/cuda_toolkit_tests benchmarks/gpu_bench tests/distributed/process_pool_tests
  tests/distributed/fault_measure_worker)
# The base system every Linux machine with a GPU driver has; everything else is bundled.
system_libs=(linux-vdso.so.1 ld-linux-x86-64.so.2 libc.so.6 libm.so.6 libdl.so.2 librt.so.1
  libpthread.so.0 libutil.so.1 libresolv.so.2 libstdc++.so.6 libgcc_s.so.1)
# GPU libraries: found on the machine, never bundled (the driver's must match the machine's).
gpu_pattern='^lib(cuda|cudnn|nvrtc|cupti|nvperf|nvidia-)'
# What those open at run time (dlopen): found too, but a missing one only fails its stage.
gpu_optional=(libnvrtc-builtins.so.13.0 libcudnn_graph.so.9 libcudnn_ops.so.9 libcudnn_cnn.so.9
  libcudnn_engines_precompiled.so.9 libcudnn_engines_runtime_compiled.so.9
  libcudnn_heuristic.so.9 libnvperf_host.so libnvperf_target.so)
# Experiments and scripts the run uses, relative to the checkout (kept at the same paths, so
# the Python scripts find each other as they do in the source tree).
files=(experiments/gpu_check_resnet50.yaml experiments/gpu_check_resnet50_tf32.yaml
  experiments/gpu_check_resnet50_bf16.yaml
  experiments/micro_bricksize.yaml experiments/baselines/common.py
  experiments/baselines/netdefs.py experiments/baselines/torch_net.py
  experiments/baselines/jax_net.py experiments/baselines/pytorch_eager.py
  experiments/baselines/torch_compile.py experiments/baselines/jax_xla.py
  results/brickdl_store.py results/gpu_summary.py core/store/schema.sql)

# ---- 0. room ---------------------------------------------------------------------------------
# The tree alone may already leave no room for a bundle: say so before a build of minutes.
# (travel_too_large WHAT BYTES [BUNDLE]: the error, the largest tracked files and those of
# BUNDLE, exit 1.)
travel_too_large() {
  echo "device-bundle: $1 $(travel_kib "$2") KiB, over the $(travel_kib "$limit") KiB the" \
    "device tool carries (the checkout's tracked and untracked-not-ignored files, and the" \
    "carried bundle); the largest files:" >&2
  {
    travel_largest "$root" 5
    if [ -n "${3:-}" ]; then travel_largest_in "$3"; fi
  } | sed 's/^/  /' >&2
  exit 1
}
if tree=$(travel_tree_bytes "$root" "$dir"); then
  [ "$tree" -lt "$limit" ] || travel_too_large "the checkout's working tree alone travels" "$tree"
else
  echo "device-bundle: warning: the size check below counts the bundle alone" >&2
  tree=0
fi

# ---- 1. build -------------------------------------------------------------------------------
# brickdl-calibrate: bundled when this checkout has it (run.sh skips its stage otherwise).
[ -f "$root/apps/brickdl_calibrate.cpp" ] && programs+=(apps/brickdl-calibrate)
targets=(brickdl-precompile cuda_device_test_kernels)
for p in "${programs[@]}"; do targets+=("$(basename "$p")"); done
if [ $build_it -eq 1 ]; then
  echo "device-bundle: building ${targets[*]} in $build"
  # CUDA on (an error without nvcc); the architectures are the project's default, 80 and 90.
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DBRICKDL_ENABLE_CUDA=ON \
    -DBRICKDL_ENABLE_MPI=OFF -DBRICKDL_BUILD_TESTS=ON -DBRICKDL_BUILD_BENCHMARKS=ON >/dev/null
  cmake --build "$build" -j"${BRICKDL_JOBS:-2}" --target "${targets[@]}"
fi
cache=$build/CMakeCache.txt
[ -f "$cache" ] || { echo "device-bundle: $build is not a configured build" >&2; exit 1; }
grep -q '^CMAKE_BUILD_TYPE:STRING=Release$' "$cache" ||
  { echo "device-bundle: $build is not a Release build" >&2; exit 1; }
for p in "${programs[@]}"; do
  [ -x "$build/$p" ] || { echo "device-bundle: $build/$p is missing (build it first)" >&2; exit 1; }
done
# The CUDA backend's own kernels (the L2 flush, ...) must be built for sm_90: Hopper runs no
# sm_80 cubin. (The generated kernels are compiled by NVRTC on the machine, for its GPU.)
flags=$build/kernels/cuda/CMakeFiles/brickdl_cuda.dir/flags.make
archs=$(grep -o 'code=[^ ]*' "$flags" 2>/dev/null | grep -o 'sm_[0-9]*' | sort -u | tr '\n' ' ')
case "$archs" in *sm_90*) ;; *)
  echo "device-bundle: $build builds the CUDA backend for '${archs:-nothing}', not sm_90" >&2
  exit 1 ;;
esac

# ---- 2. programs ----------------------------------------------------------------------------
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
rm -rf "${dir:?}"/bin "${dir:?}"/lib "${dir:?}"/programs.tar.xz "${dir:?}"/experiments "${dir:?}"/results "${dir:?}"/core
mkdir -p "$dir/bin" "$dir/lib/fallback"
for p in "${programs[@]}"; do
  strip --strip-unneeded -o "$dir/bin/$(basename "$p")" "$build/$p"
done

# ---- 3. libraries ---------------------------------------------------------------------------
printf '%s\n' "${system_libs[@]}" >"$dir/system-libs.txt"
declare -A gpu_needed=()
while read -r lib path; do
  if [[ $lib =~ $gpu_pattern ]]; then
    gpu_needed[$lib]=1
  elif ! grep -qx "$lib" "$dir/system-libs.txt"; then
    [ -n "$path" ] && [ -f "$path" ] ||
      { echo "device-bundle: $lib is not found here (ldd)" >&2; exit 1; }
    [ -e "$dir/lib/$lib" ] || strip --strip-unneeded -o "$dir/lib/$lib" "$(readlink -f "$path")"
  fi
done < <(for f in "$dir"/bin/*; do ldd "$f"; done |
  awk '/=>/ {print $1, ($3 == "not" ? "" : $3)}' | sort -u)
for lib in libstdc++.so.6 libgcc_s.so.1; do
  # (awk reads all of ldconfig's output: an early exit would end the pipe with SIGPIPE)
  path=$(ldconfig -p | awk -v l="$lib" '$1 == l && /x86-64/ && !found {print $NF; found = 1}')
  strip --strip-unneeded -o "$dir/lib/fallback/$lib" "$(readlink -f "$path")"
done
{
  for lib in "${!gpu_needed[@]}"; do echo "$lib needed"; done | sort
  for lib in "${gpu_optional[@]}"; do echo "$lib optional"; done
} >"$dir/gpu-libs.txt"

# ---- 4. experiments, scripts, run.sh ----------------------------------------------------------
for f in "${files[@]}"; do
  mkdir -p "$dir/$(dirname "$f")"
  cp "$root/$f" "$dir/$f"
done
cp "$root/scripts/device/run.sh" "$dir/run.sh"
chmod +x "$dir/run.sh"

# ---- 6. kernels compiled ahead -------------------------------------------------------------
rm -f "$dir"/nvrtc-cache.tar.*
if [ $precompile -eq 1 ]; then
  pre=$(mktemp -d) # precompile.sh names a tool the build lacks
  # In two lanes; a kernel that fails to compile or that ptxas flags fails the bundle.
  "$root/scripts/device/precompile.sh" "$build" "$pre/nvrtc-cache" | tee "$pre/precompile.log" ||
    { echo "device-bundle: compiling the kernels ahead failed (above)" >&2; exit 1; }
  # The NVRTC that compiled them, and how long one took here: run.sh's verdict line.
  nvrtc=$(grep -o '(NVRTC [0-9.]*)' "$pre/precompile.log" | tail -1 | tr -d '()' | cut -d' ' -f2)
  each=$(awk '/ compiled in / {for (i = 1; i < NF; ++i) if ($(i + 1) == "compiled") {
    n += $i; s += $(i + 3)}} END {printf "%.1f", n ? s / n : 1}' "$pre/precompile.log")
  cache_line="nvrtc-cache: NVRTC $nvrtc sm_90a $(ls "$pre/nvrtc-cache" | wc -l) kernels $each s each"
  tar -C "$pre" -cJf "$dir/nvrtc-cache.tar.xz" nvrtc-cache
  rm -rf "$pre"
fi

# ---- 7. manifest and size -------------------------------------------------------------------
rev=$(git -C "$root" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
git -C "$root" diff --quiet HEAD 2>/dev/null || rev="$rev+uncommitted"
{
  echo "brickdl device bundle, revision $rev, built $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "device code: ${archs}($(nvcc --version 2>/dev/null | tail -1))"
  if [ -n "${cache_line:-}" ]; then echo "$cache_line"; fi
  echo "made on: $(grep PRETTY_NAME /etc/os-release 2>/dev/null | cut -d= -f2), $(ldd --version | head -1)"
  echo "needs: glibc $(cd "$dir" && for f in bin/* lib/*.so*; do objdump -T "$f" 2>/dev/null; done |
    grep -o 'GLIBC_[0-9.]*' | sort -V -u | tail -1 | cut -d_ -f2) or newer"
  packed=(bin lib)
  [ -f "$dir/nvrtc-cache.tar.xz" ] && packed+=(nvrtc-cache.tar.xz)
  (cd "$dir" && find "${packed[@]}" -type f -printf '%s %p\n' | sort -k2 | while read -r s p; do
    echo "$s $(sha256sum "$p" | cut -c1-16) $p"; done)
} >"$dir/MANIFEST.txt"
bytes=$(du -sb "$dir" | cut -f1)
echo "device-bundle: $dir: $((bytes / 1024)) KiB ($(ls "$dir/bin" | wc -l) programs," \
  "$(find "$dir/lib" -maxdepth 1 -type f -name '*.so*' | wc -l) libraries;" \
  "GPU libraries found at run time:" \
  "$(awk '$2 == "needed" {printf "%s ", $1}' "$dir/gpu-libs.txt"))"
# bin/ and lib/ travel packed: the source tree and the bundle together must stay under the
# device tool's 64 MiB, and packed they take about a fifth (run.sh unpacks them first).
tar -C "$dir" -cf - bin lib | xz -T2 -3 >"$dir/programs.tar.xz"
rm -rf "${dir:?}/bin" "${dir:?}/lib"
bytes=$(travel_folder_bytes "$dir")
echo "device-bundle: packed bin/ and lib/ into programs.tar.xz: $((bytes / 1024)) KiB in all"
# Counted again: the build may have written files that are not ignored.
tree=$(travel_tree_bytes "$root" "$dir" 2>/dev/null) || tree=0
total=$((tree + bytes))
[ "$total" -le "$limit" ] || travel_too_large "the checkout's tree ($(travel_kib "$tree") KiB) and \
the bundle ($(travel_kib "$bytes") KiB) travel" "$total" "$dir"
echo "device-bundle: travels: the checkout's tree $(travel_kib "$tree") KiB + the bundle" \
  "$(travel_kib "$bytes") KiB = $(travel_kib "$total") KiB of $(travel_kib "$limit") KiB;" \
  "$(((limit - total) / 1024)) KiB to spare"
