#!/usr/bin/env bash
# The paper's seven models at their experiments' full sizes: each exported to ONNX by
# brickdl-run (from the experiment file), the experiment re-pointed at the exported file, and
# both tuned model-only; prints one line per model: same plan or not, and the import time.
#
#   scripts/check-onnx-plans.sh [OUT_DIR]      (default out/onnx-plans; needs a build)
#
# Writes OUT_DIR/summary.txt. Exits 1 when a plan differs.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BRICKDL_BUILD_DIR:-$root/build}
out=${1:-$root/out/onnx-plans}
mkdir -p "$out"
status=0
: > "$out/summary.txt"
for model in resnet50 vgg16_bn darknet53 drn_c_26 resnet3d_34 deepcam inception_v4; do
  exp="$root/experiments/$model.yaml"
  dir="$out/$model"
  rm -rf "$dir" && mkdir -p "$dir"
  "$build/apps/brickdl-run" --model "$exp" --export-onnx "$dir/$model.onnx" > "$dir/export.log"
  # The same experiment with `model:` pointing at the exported file.
  python3 - "$exp" "$dir/onnx.yaml" "$model.onnx" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
text, n = re.subn(r"^model:.*$", "model: " + sys.argv[3], text, count=1, flags=re.M)
assert n == 1, "no model: line"
open(sys.argv[2], "w").write(text)
PY
  cp "$exp" "$dir/zoo.yaml"
  for e in zoo onnx; do
    start=$(date +%s.%N)
    "$build/apps/brickdl-tune" "$dir/$e.yaml" --backend none --quiet --db "$dir/$e.db" \
      --out "$dir/$e-out" > "$dir/$e.log"
    end=$(date +%s.%N)
    python3 -c "print($end - $start)" > "$dir/$e.seconds"
  done
  verdict=$(python3 - "$dir" <<'PY'
import json, sys
d = sys.argv[1]
a = json.load(open(d + "/zoo-out/plan.json"))["plan"]
b = json.load(open(d + "/onnx-out/plan.json"))["plan"]
print("same plan" if a == b else "PLAN DIFFERS")
PY
)
  [ "$verdict" = "same plan" ] || status=1
  size=$(stat -c %s "$dir/$model.onnx")
  printf '%-13s %s  (%d groups; file %.1f MB; tune: zoo %.2f s, onnx %.2f s)\n' "$model" "$verdict" \
    "$(python3 -c "import json;print(len(json.load(open('$dir/zoo-out/plan.json'))['plan']['groups']))")" \
    "$(python3 -c "print($size / 1e6)")" "$(cat "$dir/zoo.seconds")" "$(cat "$dir/onnx.seconds")" \
    | tee -a "$out/summary.txt"
  rm -f "$dir/$model.onnx"
done
exit $status
