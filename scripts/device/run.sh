#!/usr/bin/env bash
# The device run of a brickdl bundle: what runs on a lent GPU machine, which has no package
# registry and none of brickdl's build dependencies. scripts/device-bundle.sh DIR builds the
# bundle on the development machine and copies this file to DIR/run.sh:
#
#   DIR/run.sh OUT
#
# Stages, in the order of the value of what they return. Each is time-boxed; none is gated
# on an earlier one's failure; the database and the summary are refreshed after each one, so
# a run stopped from outside still leaves its evidence in OUT.
#
#   env         the device (nvidia-smi, bin/brickdl-device: attributes against the named
#               spec), where NVRTC / cuDNN / CUPTI were found, ldd of every binary
#   tune_fp32   ResNet-50's first two bottleneck blocks, cuda backend, fp32: every candidate
#               validated, timed cold, counted (experiments/gpu_check_resnet50.yaml)
#   tune_tf32   the same in tf32 (gpu_check_resnet50_tf32.yaml)
#   summary     results/gpu_summary.py, printed (it is refreshed after every stage)
#   dev_correct the device correctness tests (cuda_device_tests *Match*)
#   micro       the Fig 11 microbenchmark (micro_bricksize.yaml)
#   dev_cupti   the CUPTI, flush and failure-status device tests; NVRTC / CUPTI toolkit tests
#   tune_bf16   the two blocks in bf16 against cuDNN on bf16 tensors (gpu_check_resnet50_bf16.yaml)
#   frameworks  PyTorch eager, JAX/XLA, torch.compile on ResNet-50 at the same batch, fp32
#               and TF32 (experiments/baselines/), while time is left
#   summary     again, printed last
#
# OUT receives at most 6 files: console.log (this output), env.txt, summary.txt, summary.csv,
# brickdl.db (a consistent copy) and logs.tar.gz (every stage's log).
#
# Exit status: 0 every stage ok; 1 some stage failed or timed out (the summary says which);
# 2 bad usage; 3 no GPU here (one line; the libraries were resolved first); 4 a library the
# bundle needs is missing here (env.txt says which and where it was looked for).
#
# Environment: BRICKDL_DEVICE_BUDGET_S (default 400) caps the whole run; BRICKDL_DEVICE_SPEC
# forces the model's GPU spec (default: the one matching the device's name, else H200);
# BRICKDL_DEVICE_REHEARSAL=1 rehearses the whole run on a machine without a GPU (tuning on the
# cpu backend; the device tests then skip and count as failed), to check this script.
set -uo pipefail

usage() { echo "usage: $0 OUT" >&2; exit 2; }
[ $# -eq 1 ] || usage
bundle=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$1" || usage
out=$(cd "$1" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/brickdl-device.XXXXXX")
logs=$work/logs
mkdir -p "$logs"
stages=$work/stages.txt
: >"$stages"
exec > >(tee -a "$out/console.log") 2>&1
budget=${BRICKDL_DEVICE_BUDGET_S:-400}
t0=$SECONDS
reserve=25 # kept for the last summary and the archive
failed=0
say() { echo "run.sh [$((SECONDS - t0))s] $*"; }

# ---- libraries -----------------------------------------------------------------------------
# Our binaries get the bundle's libraries and the GPU libraries found here; nothing else in
# this process tree does (PyTorch and JAX bring their own).
libpath=$bundle/lib
bx() { LD_LIBRARY_PATH=$libpath${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} "$@"; }

# Folders that may hold NVRTC, cuDNN and CUPTI: the CUDA toolkit's, then every Python's
# site-packages (the nvidia-* wheels), then the dynamic linker's cache.
candidate_dirs() {
  local cuda
  for cuda in "${CUDA_HOME:-}" /usr/local/cuda /usr/local/cuda-13*; do
    [ -n "$cuda" ] || continue
    for d in lib64 lib targets/x86_64-linux/lib extras/CUPTI/lib64; do
      [ -d "$cuda/$d" ] && echo "$cuda/$d"
    done
  done
  local py sp
  for py in python3 /usr/bin/python3; do
    command -v "$py" >/dev/null 2>&1 || continue
    for sp in $("$py" -c 'import site, sys
print("\n".join(site.getsitepackages() + [site.getusersitepackages()]))' 2>/dev/null); do
      for d in "$sp"/nvidia/*/lib "$sp"/nvidia/cu13/lib; do
        [ -d "$d" ] && echo "$d"
      done
    done
  done
  ldconfig -p 2>/dev/null | awk -F'=> ' '/=>/ {print $2}' | xargs -r -n1 dirname | sort -u
}

# Finds each library of $bundle/gpu-libs.txt (one soname a line, "needed" or "optional" after
# it) and adds its folder to libpath. Missing needed ones are listed in $missing.
find_gpu_libs() {
  local dirs name kind d found
  mapfile -t dirs < <(candidate_dirs | awk '!seen[$0]++')
  missing=""
  while read -r name kind; do
    [ -n "$name" ] || continue
    found=""
    for d in "${dirs[@]}"; do
      if [ -e "$d/$name" ]; then found=$d; break; fi
    done
    if [ -n "$found" ]; then
      echo "found $name in $found"
      case ":$libpath:" in *":$found:"*) ;; *) libpath=$libpath:$found ;; esac
    elif [ "$kind" = needed ]; then
      echo "MISSING $name (needed; looked in: ${dirs[*]})"
      missing="$missing $name"
    else
      echo "missing $name (optional: the stages that load it fail; looked in the same folders)"
    fi
  done <"$bundle/gpu-libs.txt"
}

# ldd of every binary and bundled library: "not found" anywhere, or a library resolved
# outside the bundle, the GPU libraries' folders and the base system ($bundle/system-libs.txt)
# is a defect of the bundle. Prints the offending lines; returns 1 if there are any.
check_ldd() {
  local f bad=0 line lib path
  for f in "$bundle"/bin/* "$bundle"/lib/*.so*; do
    while read -r line; do
      case "$line" in
        *"not found"*) echo "$(basename "$f"): $line"; bad=1; continue ;;
      esac
      lib=${line%% =>*}
      path=$(echo "$line" | awk -F'=> ' '/=>/ {print $2}' | awk '{print $1}')
      [ -n "$path" ] || continue
      grep -qx "$lib" "$bundle/system-libs.txt" && continue
      case ":$libpath:" in *":$(dirname "$path"):"*) continue ;; esac
      echo "$(basename "$f"): $lib resolved outside the bundle and the GPU libraries: $path"
      bad=1
    done < <(bx ldd "$f" 2>&1 | sed 's/^[[:space:]]*//')
  done
  return $bad
}

stage_env() {
  {
    echo "== bundle"; cat "$bundle/MANIFEST.txt" 2>/dev/null
    echo "== host"; uname -a; (grep PRETTY_NAME /etc/os-release || true)
    ldd --version 2>&1 | head -1
    echo "== nvidia-smi"
    command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total,clocks.max.sm,clocks.max.mem,clocks.sm,clocks.mem,power.limit,persistence_mode --format=csv 2>&1 || true
    echo "== libraries"
    find_gpu_libs
    if ! check_ldd >"$work/ldd-bad.txt" && [ -d "$bundle/lib/fallback" ]; then
      echo "ldd: trying the bundle's libstdc++ / libgcc_s (lib/fallback)"
      libpath=$libpath:$bundle/lib/fallback
    fi
    if check_ldd >"$work/ldd-bad.txt"; then echo "ldd: every library resolved"; else
      echo "ldd: PROBLEMS"; cat "$work/ldd-bad.txt"; missing="$missing ldd"; fi
    echo "LD_LIBRARY_PATH for brickdl: $libpath"
    echo "== device"
    bx "$bundle/bin/brickdl-device" ${BRICKDL_DEVICE_SPEC:+--spec "$BRICKDL_DEVICE_SPEC"} \
      --json >"$work/device.json" 2>"$work/device.err"
    device_rc=$?
    cat "$work/device.json" "$work/device.err"
    bx "$bundle/bin/brickdl-device" ${BRICKDL_DEVICE_SPEC:+--spec "$BRICKDL_DEVICE_SPEC"} \
      >"$work/device.txt" 2>&1
    cat "$work/device.txt"
  } >"$out/env.txt" 2>&1
}

# ---- stages --------------------------------------------------------------------------------

# stage NAME CAP_S COMMAND...: runs COMMAND with its output in logs/NAME.log for at most
# CAP_S seconds (less when the run's budget is nearly spent), records the outcome.
stage() {
  local name=$1 cap=$2 left rc start
  shift 2
  left=$((budget - reserve - (SECONDS - t0)))
  [ "$cap" -le "$left" ] || cap=$left
  if [ "$cap" -lt 10 ]; then
    echo "$name skipped(no-time)" >>"$stages"
    say "$name: skipped, no time left"
    failed=1
    return 0
  fi
  say "$name (at most ${cap}s; log $name.log)"
  start=$SECONDS
  timeout -k 5 "$cap" "$@" >"$logs/$name.log" 2>&1
  rc=$?
  local took=$((SECONDS - start)) result=ok
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then result="timeout"; elif [ $rc -ne 0 ]; then
    result="failed(exit $rc)"; fi
  [ "$result" = ok ] || failed=1
  echo "$name $result ${took}s" >>"$stages"
  say "$name: $result in ${took}s"
  [ "$result" = ok ] || tail -5 "$logs/$name.log" | sed 's/^/    /'
  snapshot
  return 0
}

# A consistent copy of the database (its WAL included) in OUT, and the logs archive.
snapshot() {
  if [ -f "$work/brickdl.db" ]; then
    python3 - "$work/brickdl.db" "$out/brickdl.db" <<'PY' 2>>"$logs/snapshot.log" || true
import sqlite3, sys
src = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True, timeout=10)
dst = sqlite3.connect(sys.argv[2])
src.backup(dst)
dst.close()
PY
  fi
  [ -f "$work/brickdl.db" ] && write_summary
  cp "$stages" "$logs/stages.txt" 2>/dev/null
  tar -C "$work" -czf "$out/logs.tar.gz" logs 2>/dev/null || true
}

# tune NAME EXPERIMENT BUDGET_S: the experiment predicted for this device's spec, measured with
# the cuda backend within BUDGET_S of measuring (a cut the tuner honours; the stage's own cap
# is 45 s more).
tune() {
  local name=$1 exp=$2 b=$3 be=$backend
  sed -E -e "s/^(  gpu: )[A-Za-z0-9-]+/\1$spec/" \
    -e "s/^(  budget_s:).*/\1 $b/" "$bundle/experiments/$exp" >"$work/$name.yaml"
  grep -q '^  budget_s:' "$work/$name.yaml" ||
    sed -i "s/^measurement:.*/&\n  budget_s: $b/" "$work/$name.yaml"
  # A rehearsal predicts what the cpu backend cannot compute (tf32) with the model alone.
  [ "$be" = cpu ] && ! grep -q '^precision: fp32' "$work/$name.yaml" && be=none
  stage "$name" $((b + 45)) env BRICKDL_CACHE_DIR="$work/nvrtc-cache" \
    LD_LIBRARY_PATH="$libpath" "$bundle/bin/brickdl-tune" "$work/$name.yaml" --backend "$be" \
    --db "$work/brickdl.db" --out "$work/$name"
}

# Device tests: a skip on a machine with a GPU is a failure.
device_stage() {
  local name=$1 cap=$2 filter=$3
  stage "$name" "$cap" bash -c "LD_LIBRARY_PATH='$libpath' '$bundle/bin/cuda_device_tests' \
    --gtest_filter='$filter'"
  if grep -q '^\[  SKIPPED \]' "$logs/$name.log"; then
    say "$name: tests were SKIPPED on a machine with a GPU"
    sed -i "s/^$name ok /$name skipped-tests /" "$stages"
    failed=1
  fi
  grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$logs/$name.log" | sed "s/^/    /"
}

# The summary (results/gpu_summary.py) into OUT/summary.txt and OUT/summary.csv.
write_summary() {
  timeout 30 python3 "$bundle/results/gpu_summary.py" "$work/brickdl.db" \
    --device-json "$work/device.json" --stages "$stages" --csv "$out/summary.csv" \
    --title "brickdl device run $(date -u +%Y-%m-%dT%H:%MZ)" >"$out/summary.txt" 2>&1
}

frameworks() {
  local script tf
  for script in pytorch_eager jax_xla torch_compile; do
    for tf in "" --tf32; do
      stage "fw_${script}${tf:+_tf32}" 90 env PYTHONUNBUFFERED=1 python3 \
        "$bundle/experiments/baselines/$script.py" "$bundle/experiments/gpu_check_resnet50.yaml" \
        --db "$work/brickdl.db" --warmup 5 --repetitions 30 $tf
      case "$(tail -1 "$stages")" in *"exit 3"*) break ;; esac # framework unavailable here
    done
  done
}

# The kernels compiled ahead for sm_90 (device-bundle.sh) into $work/nvrtc-cache: by tar and
# xz, else by Python's tarfile (a machine may lack the xz program). NVRTC compiles what the
# cache lacks, so a cache that cannot be unpacked costs device time, not the run.
unpack_cache() {
  local tarball=$bundle/nvrtc-cache.tar.xz
  if [ ! -f "$tarball" ]; then
    say "NVRTC cache: none in the bundle; NVRTC compiles every kernel here"
    return 0
  fi
  if ! tar -C "$work" -xJf "$tarball" 2>"$logs/unpack.log"; then
    rm -rf "$work/nvrtc-cache"
    python3 - "$tarball" "$work" 2>>"$logs/unpack.log" <<'PY' || rm -rf "$work/nvrtc-cache"
import sys, tarfile
with tarfile.open(sys.argv[1], "r:xz") as t:
    t.extractall(sys.argv[2], **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
PY
  fi
  if [ -d "$work/nvrtc-cache" ]; then
    say "NVRTC cache: $(ls "$work/nvrtc-cache" | wc -l) kernels compiled ahead for sm_90"
  else
    say "NVRTC cache: $tarball could not be unpacked ($(tail -1 "$logs/unpack.log"));" \
      "NVRTC compiles every kernel here"
  fi
}

# ---- the run -------------------------------------------------------------------------------
say "bundle $bundle -> $out (budget ${budget}s)"
missing=""
device_rc=0
stage_env
echo "env ok $((SECONDS - t0))s" >>"$stages"
say "GPU libraries: $(grep -c '^found' "$out/env.txt") found, $(grep -c '^MISSING' "$out/env.txt")" \
  "needed and $(grep -c '^missing' "$out/env.txt") optional ones missing;" \
  "$(grep '^ldd:' "$out/env.txt" | tail -1)"
grep -E '^(MISSING|missing)' "$out/env.txt" | sed 's/^/    /'
if [ -n "$missing" ]; then
  say "FAILED: missing libraries:$missing (see env.txt)"
  snapshot
  exit 4
fi
unpack_cache
backend=cuda
if [ -n "${BRICKDL_DEVICE_REHEARSAL:-}" ]; then
  backend=cpu
  say "REHEARSAL: tuning on the cpu backend; device tests will skip"
elif [ $device_rc -ne 0 ]; then
  echo "run.sh: no GPU here ($(head -1 "$work/device.err")); the bundle's libraries all resolved; nothing else was run"
  snapshot
  exit 3
fi
spec=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1])).get("spec") or "H200")' \
  "$work/device.json" 2>/dev/null || echo H200)
spec=${BRICKDL_DEVICE_SPEC:-$spec}
[ $device_rc -eq 0 ] && sed 's/^/    /' "$work/device.txt"
say "model spec $spec"

tune tune_fp32 gpu_check_resnet50.yaml 75
tune tune_tf32 gpu_check_resnet50_tf32.yaml 75
cat "$out/summary.txt" 2>/dev/null # the tuning's evidence, in case nothing later returns
device_stage dev_correct 75 '*Match*'
tune micro micro_bricksize.yaml 30
device_stage dev_cupti 75 '-*Match*'
stage toolkit_tests 30 env LD_LIBRARY_PATH="$libpath" "$bundle/bin/cuda_toolkit_tests"
tune tune_bf16 gpu_check_resnet50_bf16.yaml 45
frameworks

reserve=0
snapshot
rm -rf "$work"
echo
cat "$out/summary.txt"
say "done; OUT holds: $(cd "$out" && ls | tr '\n' ' ')"
exit $failed
