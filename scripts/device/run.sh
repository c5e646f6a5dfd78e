#!/usr/bin/env bash
# The device run of a brickdl bundle: what runs on a lent GPU machine, which has no package
# registry and none of brickdl's build dependencies. scripts/device-bundle.sh DIR builds the
# bundle on the development machine and copies this file to DIR/run.sh:
#
#   DIR/run.sh OUT        the run
#   DIR/run.sh --plan     every stage in order with its cap and command; runs nothing
#
# A lent GPU comes for about 15 minutes, its start included, and the run gets one command of at
# most 480 s. So the stages go in the order of the value of what they return, and the answers
# that only a GPU gives come first: the wgmma kernels' correctness (the test no host can run)
# within the first minutes, then the recovery from sticky errors, the calibration, the tunes.
# Each stage is time-boxed; none is gated on an earlier one's failure; the database and the
# summary are refreshed after each one, so a run stopped from outside still leaves its
# evidence in OUT.
#
#   stage            cap   what
#   env               20   the device (nvidia-smi, bin/brickdl-device: attributes against the
#                          named spec; the driver's, CUDA runtime's, cuDNN's and NVRTC's
#                          versions), where NVRTC / cuDNN / CUPTI were found, ldd of every
#                          binary, and whether the bundle's NVRTC cache fits this NVRTC (one
#                          line: "NVRTC cache: compiled by NVRTC X.Y for sm_90a; ...", and one
#                          more when the driver is older than CUDA X.Y)
#   dev_wgmma         50   Device.WgmmaKernelsMatchTheirHostEmulation
#   dev_tensor_core   40   Device.TensorCoreKernelsMatchTheirHostEmulation
#   dev_sticky        30   Device.MeasurerResetsTheDeviceOnlyAfterStickyErrors (in process)
#   dev_worker        40   ProcessPoolFaults.OnTheGpuATrapAndAnEndlessKernelCostOneCandidateEach
#                          (bin/process_pool_tests: the same faults in measuring worker
#                          processes, as brickdl-tune measures by default)
#   dev_statuses      30   Device.MeasurerStatusesForFailingCandidates
#                          each device test in a process of its own (a crash or a sticky error
#                          in one takes no other); their kernels come compiled in the bundle's
#                          cache (dev_worker's few are compiled there)
#   calibrate         45   bin/brickdl-calibrate --spec SPEC: OUT/calibration.json (skipped,
#                          said, when the bundle has no brickdl-calibrate)
#   tune_fp32         75   ResNet-50's first two bottleneck blocks, cuda backend, fp32: every
#                          candidate validated, timed cold, counted (gpu_check_resnet50.yaml),
#                          45 s of measuring, timeout_s 5 per candidate, --calibration with
#                          calibration.json when brickdl-tune has the flag
#   tune_tf32         75   the same in tf32 (gpu_check_resnet50_tf32.yaml)
#                   ----
#                    405   + 25 s kept for the last summary and archive = 430 <= the budget, 440
#   then, as time allows (each cut to what is left, skipped under 10 s):
#   dev_cluster       30   Device.ClusterKernelsMatchTheirHostEmulation
#   dev_generated     45   Device.GeneratedKernelsMatchTheCpuReference
#   dev_rest          60   the other device tests, in one process (CUPTI, flush, cuDNN, ...)
#   micro             60   the Fig 11 microbenchmark (micro_bricksize.yaml), 30 s of measuring
#   toolkit_tests     30   the NVRTC / CUPTI toolkit tests
#   tune_bf16         75   the two blocks in bf16 against cuDNN on bf16 tensors
#   fw_*              90   PyTorch eager, JAX/XLA, torch.compile on ResNet-50 at the same batch,
#                          fp32 and TF32 (experiments/baselines/)
#   summary                results/gpu_summary.py, printed last (refreshed after every stage)
#
# A tuner that dies (a signal, an exit other than 0, 2 (bad input) or 130, or its stage's
# timeout) is relaunched once, and resumes from the database: brickdl-tune, without --fresh,
# takes every candidate already measured on this target from --db. The log says so and the
# stages file records both runs (NAME died(...) relaunched, then NAME-relaunch). A relaunch
# spends the time of the stages after it (stages are cut to what is left), never more.
#
# The timeout of a candidate (measurement.timeout_s, 60 s in the experiments) is lowered to 5 s:
# a hung kernel costs 5 s of a tune, not 70 of its 75.
#
# OUT receives at most 7 files: console.log (this output), env.txt, summary.txt, summary.csv,
# brickdl.db (a consistent copy), calibration.json and logs.tar.gz (every stage's log); the
# device tool brings back 8 at most.
#
# Exit status: 0 every stage ok; 1 some stage failed or timed out (the summary says which);
# 2 bad usage; 3 no GPU here (one line; the libraries were resolved first); 4 a library the
# bundle needs is missing here (env.txt says which and where it was looked for).
#
# Environment: BRICKDL_DEVICE_BUDGET_S (default 440: the device tool ends the command at about
# 480 s, and the machine's start and the transfers come out of the same lease) caps the whole
# run; BRICKDL_DEVICE_SPEC forces the model's GPU spec (default: the one matching the device's
# name, else H200); BRICKDL_DEVICE_REHEARSAL=1 rehearses the whole run on a machine without a
# GPU (tuning on the cpu backend; the device tests then skip and count as failed), to check
# this script. Sourced (". run.sh"), it defines its functions and runs nothing (the dry run
# tests them so).
set -uo pipefail

# ---- set-up ----------------------------------------------------------------------------------
# The programs and libraries travel packed (device-bundle.sh: programs.tar.xz, about a fifth of
# their size, so that the source tree and the bundle stay under the device tool's 64 MiB);
# unpacked into the bundle before anything runs, once: a second run finds bin/ there. By tar
# and xz, else by Python's tarfile (a machine may lack the xz program). Exit 4 when neither can.
unpack_programs() {
  local here
  here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
  [ -d "$here/bin" ] && return 0
  if [ ! -f "$here/programs.tar.xz" ]; then
    echo "run.sh: the bundle has neither bin/ nor programs.tar.xz: rebuild it" \
      "(scripts/device-bundle.sh)" >&2
    exit 4
  fi
  if ! tar -C "$here" -xJf "$here/programs.tar.xz" 2>/dev/null; then
    rm -rf "${here:?}/bin" "${here:?}/lib"
    python3 - "$here/programs.tar.xz" "$here" <<'PY' || rm -rf "${here:?}/bin" "${here:?}/lib"
import sys, tarfile
with tarfile.open(sys.argv[1], "r:xz") as t:
    t.extractall(sys.argv[2], **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
PY
  fi
  if [ ! -d "$here/bin" ]; then
    echo "run.sh: $here/programs.tar.xz could not be unpacked (tar and Python both failed)" >&2
    exit 4
  fi
}

# setup_run OUT: the run's folders and settings. plan=1 (--plan) prints instead of running.
setup_run() {
  bundle=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
  out=$1
  work=$(mktemp -d "${TMPDIR:-/tmp}/brickdl-device.XXXXXX")
  logs=$work/logs
  mkdir -p "$logs"
  stages=$work/stages.txt
  : >"$stages"
  budget=${BRICKDL_DEVICE_BUDGET_S:-440}
  t0=$SECONDS
  reserve=25 # kept for the last summary and the archive
  failed=0
  phase=first      # "first": the stages the budget is sized for; "rest": as time allows
  planned_first=20 # the caps of the first stages, env's included (--plan sums them)
  missing=""
  device_rc=0
  backend=cuda
  spec=${BRICKDL_DEVICE_SPEC:-H200}
  libpath=$bundle/lib
  tune_calibration=""
}

say() { echo "run.sh [$((SECONDS - t0))s] $*"; }

# ---- libraries -----------------------------------------------------------------------------
# Our binaries get the bundle's libraries and the GPU libraries found here; nothing else in
# this process tree does (PyTorch and JAX bring their own). libpath: setup_run, then env.
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
  ldconfig -p 2>/dev/null | awk -F'=> ' '/=>/ {sub(/\/[^\/]*$/, "", $2); print $2}' | sort -u
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
# is a defect of the bundle. Prints the offending lines; returns 1 if there are any. (One awk
# over every ldd output: a fork per line took 3 s of the dry run's every run.sh.)
check_ldd() {
  local f
  for f in "$bundle"/bin/* "$bundle"/lib/*.so*; do
    bx ldd "$f" 2>&1 | sed "s|^[[:space:]]*|${f##*/} |"
  done | awk -v libpath=":$libpath:" -v syslibs="$bundle/system-libs.txt" '
    BEGIN { while ((getline l < syslibs) > 0) sys[l] = 1 }
    { file = $1; line = substr($0, length($1) + 2) }
    line ~ /not found/ { print file ": " line; bad = 1; next }
    $3 == "=>" && $4 != "" {
      if ($2 in sys) next
      dir = $4; sub(/\/[^\/]*$/, "", dir)
      if (index(libpath, ":" dir ":")) next
      print file ": " $2 " resolved outside the bundle and the GPU libraries: " $4; bad = 1
    }
    END { exit bad }'
}

stage_env() {
  {
    echo "== bundle"; cat "$bundle/MANIFEST.txt" 2>/dev/null
    echo "== host"; uname -a; (grep PRETTY_NAME /etc/os-release || true)
    ldd --version 2>&1 | head -1
    echo "== nvidia-smi"
    command -v nvidia-smi >/dev/null && timeout 15 nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total,clocks.max.sm,clocks.max.mem,clocks.sm,clocks.mem,power.limit,persistence_mode --format=csv 2>&1 || true
    echo "== libraries"
    find_gpu_libs
    local ldd_ok=1
    check_ldd >"$work/ldd-bad.txt" || ldd_ok=0
    if [ $ldd_ok -eq 0 ] && [ -d "$bundle/lib/fallback" ]; then
      echo "ldd: trying the bundle's libstdc++ / libgcc_s (lib/fallback)"
      libpath=$libpath:$bundle/lib/fallback
      ldd_ok=1
      check_ldd >"$work/ldd-bad.txt" || ldd_ok=0
    fi
    if [ $ldd_ok -eq 1 ]; then echo "ldd: every library resolved"; else
      echo "ldd: PROBLEMS"; cat "$work/ldd-bad.txt"; missing="$missing ldd"; fi
    echo "LD_LIBRARY_PATH for brickdl: $libpath"
    echo "== device (the driver's, CUDA runtime's, cuDNN's and NVRTC's versions among them)"
    bx timeout 20 "$bundle/bin/brickdl-device" ${BRICKDL_DEVICE_SPEC:+--spec "$BRICKDL_DEVICE_SPEC"} \
      --json >"$work/device.json" 2>"$work/device.err"
    device_rc=$?
    cat "$work/device.json" "$work/device.err"
    bx timeout 20 "$bundle/bin/brickdl-device" ${BRICKDL_DEVICE_SPEC:+--spec "$BRICKDL_DEVICE_SPEC"} \
      >"$work/device.txt" 2>&1
    cat "$work/device.txt"
  } >"$out/env.txt" 2>&1
}

# A field of device.json (brickdl-device --json; without a GPU it holds nvrtc_version alone).
device_field() {
  python3 -c 'import json, sys
try:
    v = json.load(open(sys.argv[1])).get(sys.argv[2])
except (OSError, ValueError):
    v = None
print("" if v is None else v)' "$work/device.json" "$1" 2>/dev/null
}

# The kernels compiled ahead (device-bundle.sh) into $work/nvrtc-cache: by tar and xz, else by
# Python's tarfile (a machine may lack the xz program). NVRTC compiles what the cache lacks, so
# a cache that cannot be unpacked costs device time, not the run.
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
    say "NVRTC cache: $(ls "$work/nvrtc-cache" | wc -l) kernels compiled ahead"
    cache_verdict
  else
    say "NVRTC cache: $tarball could not be unpacked ($(tail -1 "$logs/unpack.log"));" \
      "NVRTC compiles every kernel here"
  fi
}

# One line: whether the cache's kernels are used here. Their key holds NVRTC's major.minor and
# the architecture (kernels/cuda/nvrtc_compiler.cu), so another NVRTC, or another GPU, finds
# none of them and compiles every kernel, silently: this line says so, and how long that costs.
# MANIFEST.txt's line: "nvrtc-cache: NVRTC X.Y sm_90a N kernels S s each".
cache_verdict() {
  local line nvrtc arch each here cc
  line=$(grep -m1 '^nvrtc-cache: NVRTC ' "$bundle/MANIFEST.txt" 2>/dev/null)
  nvrtc=$(echo "$line" | awk '{print $3}')
  arch=$(echo "$line" | awk '{print $4}')
  each=$(echo "$line" | awk '{print $7}')
  here=$(device_field nvrtc_version)
  cc=$(device_field cc)
  if [ -z "$nvrtc" ]; then
    say "NVRTC cache: MANIFEST.txt does not say which NVRTC compiled it; used where the keys match"
  elif [ -z "$here" ] || [ "$here" = none ]; then
    say "NVRTC cache: compiled by NVRTC $nvrtc for $arch; this machine's NVRTC is unknown" \
      "(brickdl-device did not say): used if it is $nvrtc"
  elif [ "$here" != "$nvrtc" ]; then
    say "NVRTC cache: compiled by NVRTC $nvrtc for $arch; this machine's NVRTC is $here:" \
      "differs: every kernel will be compiled here (~${each:-1} s each)"
  elif [ -n "$cc" ] && [ "sm_$cc" != "${arch%a}" ]; then
    say "NVRTC cache: compiled by NVRTC $nvrtc for $arch; this device is sm_$cc:" \
      "differs: every kernel will be compiled here (~${each:-1} s each)"
  else
    say "NVRTC cache: compiled by NVRTC $nvrtc for $arch; this machine's NVRTC is $here: used"
  fi
  driver_verdict "$nvrtc"
}

# driver_verdict X.Y: one line when this machine's driver (device.json's driver_version,
# 1000 * major + 10 * minor, as cudaDriverGetVersion gives it) is older than CUDA X.Y, whose NVRTC
# compiled the cache: a driver loads the cubins of its own CUDA release and older ones only.
driver_verdict() {
  local driver need
  driver=$(device_field driver_version)
  [ -n "$1" ] && [[ $driver =~ ^[0-9]+$ ]] || return 0
  need=$(echo "$1" | awk -F. '{print $1 * 1000 + $2 * 10}')
  [ "$driver" -lt "$need" ] || return 0
  say "NVRTC cache: this driver supports CUDA $((driver / 1000)).$((driver % 1000 / 10))," \
    "older than the CUDA $1 whose NVRTC compiled the cache: its kernels may not load here" \
    "(each a launch error)"
}

# ---- stages --------------------------------------------------------------------------------

# stage NAME CAP_S COMMAND...: runs COMMAND with its output in logs/NAME.log for at most
# CAP_S seconds (less when the run's budget is nearly spent), records the outcome; its exit
# status in stage_rc (-1: not run). With --plan: prints the stage, its cap and its command.
stage() {
  local name=$1 cap=$2 left rc start
  shift 2
  stage_rc=-1
  if [ -n "${plan:-}" ]; then
    local cmd="${*//$work/WORK}"
    printf 'plan: %-16s %4ss  %-5s  %s\n' "$name" "$cap" "$phase" "${cmd//$bundle/BUNDLE}"
    [ "$phase" = first ] && planned_first=$((planned_first + cap))
    return 0
  fi
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
  stage_rc=$rc
  local took=$((SECONDS - start)) result=ok
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then result="timeout"; elif [ $rc -gt 128 ]; then
    result="died(signal $((rc - 128)))"; elif [ $rc -ne 0 ]; then result="failed(exit $rc)"; fi
  [ "$result" = ok ] || failed=1
  echo "$name $result ${took}s" >>"$stages"
  say "$name: $result in ${took}s"
  [ "$result" = ok ] || tail -5 "$logs/$name.log" | sed 's/^/    /'
  snapshot
  return 0
}

# Whether a tuner's exit status means it died: a signal, its stage's timeout, or an exit other
# than 0 (done), 2 (bad input: a rerun says the same) and 130 (interrupted on purpose).
tuner_died() {
  case "$1" in -1 | 0 | 2 | 130) return 1 ;; *) return 0 ;; esac
}

# tune NAME EXPERIMENT BUDGET_S: the experiment predicted for this device's spec, measured with
# the cuda backend within BUDGET_S of measuring (a cut the tuner honours; the stage's own cap
# is 30 s more, for the tuner's start, search and report), each candidate within 5 s
# (measurement.timeout_s). A tuner that dies is relaunched once with the same database: it
# resumes, measuring only what it had not yet recorded.
tune() {
  local name=$1 exp=$2 b=$3 be=$backend
  sed -E -e "s/^(  gpu: )[A-Za-z0-9-]+/\1$spec/" -e "s/^(  budget_s:).*/\1 $b/" \
    -e "s/^(  timeout_s:).*/\1 5/" "$bundle/experiments/$exp" >"$work/$name.yaml"
  grep -q '^  budget_s:' "$work/$name.yaml" ||
    sed -i "s/^measurement:.*/&\n  budget_s: $b/" "$work/$name.yaml"
  grep -q '^  timeout_s:' "$work/$name.yaml" ||
    sed -i "s/^measurement:.*/&\n  timeout_s: 5/" "$work/$name.yaml"
  # A rehearsal predicts what the cpu backend cannot compute (tf32) with the model alone.
  [ "$be" = cpu ] && ! grep -q '^precision: fp32' "$work/$name.yaml" && be=none
  local cmd=(env BRICKDL_CACHE_DIR="$work/nvrtc-cache" LD_LIBRARY_PATH="$libpath"
    "$bundle/bin/brickdl-tune" "$work/$name.yaml" --backend "$be" --db "$work/brickdl.db"
    --out "$work/$name")
  if [ -n "$tune_calibration" ] && { [ -f "$work/calibration.json" ] || [ -n "${plan:-}" ]; }; then
    cmd+=(--calibration "$work/calibration.json")
  fi
  stage "$name" $((b + 30)) "${cmd[@]}"
  tuner_died "$stage_rc" || return 0
  local why
  why=$(tail -1 "$stages" | sed "s/^$name \(.*\) [0-9]*s\$/\1/")
  sed -i "\$s/^$name \(.*\) \([0-9]*s\)\$/$name \1 relaunched \2/" "$stages"
  say "$name: the tuner died ($why); relaunched once, resuming from the database (what it" \
    "measured is kept: no --fresh)"
  stage "$name-relaunch" $((b + 30)) "${cmd[@]}"
}

# device_test NAME CAP TEST [PROGRAM]: one device test (its gtest name) of bin/PROGRAM (default
# cuda_device_tests) in a process of its own, with the bundle's NVRTC cache. A skip on a
# machine with a GPU is a failure.
device_test() {
  local name=$1 cap=$2 filter=$3 program=${4:-cuda_device_tests}
  stage "$name" "$cap" env BRICKDL_CACHE_DIR="$work/nvrtc-cache" LD_LIBRARY_PATH="$libpath" \
    "$bundle/bin/$program" --gtest_filter="$filter"
  [ "$stage_rc" -ge 0 ] || return 0
  if grep -q '^\[  SKIPPED \]' "$logs/$name.log"; then
    say "$name: tests were SKIPPED on a machine with a GPU"
    sed -i "s/^$name ok /$name skipped-tests /" "$stages"
    failed=1
  fi
  grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$logs/$name.log" | sed "s/^/    /"
}

# The calibration (bin/brickdl-calibrate, exit 0 ok, 1 some measurement failed but the file is
# written, 2 bad usage, 4 no GPU) into OUT/calibration.json; the tunes read it.
calibrate() {
  if [ ! -x "$bundle/bin/brickdl-calibrate" ]; then
    if [ -n "${plan:-}" ]; then # its time stays reserved: a bundle with it runs it here
      printf 'plan: %-16s %4ss  %-5s  %s\n' calibrate 45 "$phase" \
        "skipped: the bundle has no bin/brickdl-calibrate"
      planned_first=$((planned_first + 45))
    else
      echo "calibrate skipped(not-in-bundle)" >>"$stages"
      say "calibrate: skipped, the bundle has no bin/brickdl-calibrate (built without it)"
    fi
    return 0
  fi
  stage calibrate 45 env LD_LIBRARY_PATH="$libpath" "$bundle/bin/brickdl-calibrate" \
    --spec "$spec" --out "$work/calibration.json"
  [ -f "$work/calibration.json" ] && cp "$work/calibration.json" "$out/calibration.json"
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
      [ -n "${plan:-}" ] && continue
      case "$(tail -1 "$stages")" in *"exit 3"*) break ;; esac # framework unavailable here
    done
  done
}

# The tests run each in a process of their own, first; dev_rest runs the others together.
own_process_tests=(Device.WgmmaKernelsMatchTheirHostEmulation
  Device.TensorCoreKernelsMatchTheirHostEmulation
  Device.MeasurerResetsTheDeviceOnlyAfterStickyErrors
  Device.MeasurerStatusesForFailingCandidates
  Device.ClusterKernelsMatchTheirHostEmulation
  Device.GeneratedKernelsMatchTheCpuReference)

# The stages, in order (the header's table).
run_stages() {
  device_test dev_wgmma 50 Device.WgmmaKernelsMatchTheirHostEmulation
  device_test dev_tensor_core 40 Device.TensorCoreKernelsMatchTheirHostEmulation
  device_test dev_sticky 30 Device.MeasurerResetsTheDeviceOnlyAfterStickyErrors
  # The measuring worker processes on the GPU: a trapping and an endless kernel each cost one
  # candidate and one worker process, the tune goes on in a fresh one, and a rerun measures
  # nothing (tests/distributed/process_pool_test.cpp).
  device_test dev_worker 40 ProcessPoolFaults.OnTheGpuATrapAndAnEndlessKernelCostOneCandidateEach \
    process_pool_tests
  device_test dev_statuses 30 Device.MeasurerStatusesForFailingCandidates
  calibrate
  tune tune_fp32 gpu_check_resnet50.yaml 45
  tune tune_tf32 gpu_check_resnet50_tf32.yaml 45
  [ -n "${plan:-}" ] || cat "$out/summary.txt" 2>/dev/null # the evidence, in case nothing later returns
  phase=rest
  device_test dev_cluster 30 Device.ClusterKernelsMatchTheirHostEmulation
  device_test dev_generated 45 Device.GeneratedKernelsMatchTheCpuReference
  device_test dev_rest 60 "-$(IFS=:; echo "${own_process_tests[*]}")"
  tune micro micro_bricksize.yaml 30
  stage toolkit_tests 30 env LD_LIBRARY_PATH="$libpath" "$bundle/bin/cuda_toolkit_tests"
  tune tune_bf16 gpu_check_resnet50_bf16.yaml 45
  frameworks
}

# --plan: the stages with their caps and commands, and the first stages' sum against the budget.
print_plan() {
  plan=1
  setup_run "${TMPDIR:-/tmp}"
  [ -x "$bundle/bin/brickdl-tune" ] && bx "$bundle/bin/brickdl-tune" --help 2>/dev/null |
    grep -q -- '--calibration' && tune_calibration=1
  echo "plan: stage            cap  phase  command (BUNDLE: $bundle; WORK: the run's folder)"
  printf 'plan: %-16s %4ss  %-5s  %s\n' env 20 first \
    "nvidia-smi; ldd; brickdl-device --json; the NVRTC cache unpacked and its verdict"
  run_stages
  echo "plan: first stages ${planned_first}s + reserve ${reserve}s = $((planned_first + reserve))s;" \
    "budget ${budget}s; the device tool's limit 480s"
  rm -rf "$work"
}

main() {
  if [ "${1:-}" = --plan ]; then
    [ $# -eq 1 ] || usage
    print_plan
    return 0
  fi
  [ $# -eq 1 ] || usage
  mkdir -p "$1" || usage
  unpack_programs
  setup_run "$(cd "$1" && pwd)"
  exec > >(tee -a "$out/console.log") 2>&1
  say "bundle $bundle -> $out (budget ${budget}s)"
  [ "$budget" -le 480 ] || say "WARNING: a budget of ${budget}s is over the device tool's 480s"
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
  if [ -n "${BRICKDL_DEVICE_REHEARSAL:-}" ]; then
    backend=cpu
    say "REHEARSAL: tuning on the cpu backend; device tests will skip"
  elif [ $device_rc -ne 0 ]; then
    echo "run.sh: no GPU here ($(head -1 "$work/device.err")); the bundle's libraries all resolved; nothing else was run"
    snapshot
    exit 3
  fi
  spec=$(device_field spec)
  spec=${BRICKDL_DEVICE_SPEC:-${spec:-H200}}
  [ $device_rc -eq 0 ] && sed 's/^/    /' "$work/device.txt"
  say "model spec $spec"
  bx "$bundle/bin/brickdl-tune" --help 2>/dev/null | grep -q -- '--calibration' &&
    tune_calibration=1
  say "brickdl-tune $([ -n "$tune_calibration" ] && echo reads || echo "has no --calibration for")" \
    "the calibration"
  run_stages
  reserve=0
  snapshot
  rm -rf "$work"
  echo
  cat "$out/summary.txt"
  say "done; OUT holds: $(cd "$out" && ls | tr '\n' ' ')"
  exit $failed
}

usage() { echo "usage: $0 OUT | $0 --plan" >&2; exit 2; }

# Sourced (the dry run tests the functions): defines them, runs nothing.
[ "${BASH_SOURCE[0]}" = "$0" ] || return 0
main "$@"
