#!/usr/bin/env bash
# Files a device run's output (the folder run.sh filled, as fetched back) in the repository:
#
#   scripts/device/file-results.sh FETCHED_OUT [NAME]
#
# copies summary.txt, summary.csv, env.txt, console.log, logs.tar.gz, calibration.json (the
# calibrate stage's, when the run has one) and brickdl.db (when under 8 MiB) to results/gpu/NAME/ (default NAME: <UTC date>-<GPU name from env.txt>) and adds
# the run's line to the table in results/gpu/README.md: what ran (the stages and their
# outcome) and the verdict lines. Commit the folder and the README afterwards. Then it says
# whether a rerun still fits in what the device tool carries (scripts/lib/travel.sh): the
# checkout, now holding these files, and the bundle (BRICKDL_DEVICE_BUNDLE, default
# device-bundle/), 64 MiB at most; when not, which file to move out of the checkout until after
# the rerun. A bundle unpacked by a rehearsal here (bin/, lib/) no longer fits: rebuild it.
# BRICKDL_FILE_DATE=YYYY-MM-DD names the date of the default NAME instead of today's (UTC): a
# caller that read the date once, before filing, knows the folder even across midnight.
set -euo pipefail
[ $# -ge 1 ] && [ $# -le 2 ] || { echo "usage: $0 FETCHED_OUT [NAME]" >&2; exit 2; }
root=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=scripts/lib/travel.sh
. "$root/scripts/lib/travel.sh"
src=$1
[ -f "$src/summary.txt" ] || [ -f "$src/console.log" ] ||
  { echo "file-results: $src holds no summary.txt or console.log of a device run" >&2; exit 2; }
gpu=$(grep -m1 -o '"name": "[^"]*"' "$src/env.txt" 2>/dev/null | cut -d'"' -f4 || true)
slug=$(echo "${gpu:-unknown-gpu}" | sed 's/^NVIDIA //; s/[^A-Za-z0-9]\+/-/g; s/-$//' | tr 'A-Z' 'a-z')
name=${2:-${BRICKDL_FILE_DATE:-$(date -u +%Y-%m-%d)}-$slug}
dest=$root/results/gpu/$name
mkdir -p "$dest"
for f in summary.txt summary.csv env.txt console.log logs.tar.gz calibration.json; do
  [ -f "$src/$f" ] && cp "$src/$f" "$dest/$f"
done
if [ -f "$src/brickdl.db" ]; then
  if [ "$(stat -c %s "$src/brickdl.db")" -le $((8 * 1024 * 1024)) ]; then
    cp "$src/brickdl.db" "$dest/brickdl.db"
  else
    echo "file-results: brickdl.db is over 8 MiB: not copied (summary.csv keeps its rows)"
  fi
fi
stages=$(grep -m1 '^stages: ' "$dest/summary.txt" 2>/dev/null | sed 's/^stages: //' || true)
verdicts=$(grep -E '^[A-Za-z0-9_]+: .*: (best|no verdict)' "$dest/summary.txt" 2>/dev/null |
  paste -sd ';' - | sed 's/|/\\|/g' || true)
rev=$(grep -m1 -o 'revision [^ ,]*' "$dest/env.txt" 2>/dev/null | cut -d' ' -f2 || true)
echo "| [$name]($name/summary.txt) | ${gpu:-?} | ${rev:-?} | ${stages:-no summary} | ${verdicts:-none} |" \
  >>"$root/results/gpu/README.md"
echo "file-results: $dest ($(ls "$dest" | tr '\n' ' ')); a line was added to results/gpu/README.md"

# ---- whether a rerun still fits ----------------------------------------------------------------
bundle=${BRICKDL_DEVICE_BUNDLE:-$root/device-bundle}
if ! tree=$(travel_tree_bytes "$root" "$bundle"); then
  echo "file-results: whether a rerun fits is not known (above)"
  exit 0
fi
packed=0
[ -d "$bundle" ] && packed=$(travel_folder_bytes "$bundle")
total=$((tree + packed)) limit=$(travel_limit_bytes)
shown=${bundle#"$root"/}
what="the checkout $(travel_kib "$tree") KiB + $shown $(travel_kib "$packed") KiB ="
what="$what $(travel_kib "$total") KiB of $(travel_kib "$limit") KiB"
if [ "$total" -le "$limit" ]; then
  echo "file-results: a rerun fits: it carries $what"
else
  echo "file-results: a rerun would be REFUSED: it would carry $what. Before it, move out of the" \
    "checkout (and back after it) the largest of what this run filed:"
  travel_largest_in "$dest" | sed "s|$root/||; s/^/  /"
  if [ -d "$bundle/bin" ]; then
    echo "  (and $shown holds bin/: unpacked by a rehearsal; rebuild it: scripts/device-bundle.sh)"
  fi
fi
