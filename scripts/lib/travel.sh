# shellcheck shell=bash
# Sourced by the device scripts (bash): what the device tool's run carries to the GPU machine
# and whether it fits. The tool sends the checkout's working tree with every call: its tracked
# files, its untracked files that git does not ignore, and its shared/ folder where it has one,
# plus the ignored paths the call names in carry (the device bundle); all of it together may
# take 64 MiB (/work/.library/device/README.md, Limits), and a call over it is refused.
#
#   travel_limit_bytes                 the limit: BRICKDL_DEVICE_TRAVEL_LIMIT bytes (a test sets
#                                      it), else 64 MiB
#   travel_tree_bytes ROOT [SKIP]      the bytes of ROOT's working tree that travel without carry;
#                                      untracked files under SKIP (a folder, e.g. the bundle when
#                                      it is not ignored) are left out: carry counts them. Fails
#                                      (status 1, saying why) when ROOT is not a git checkout.
#   travel_folder_bytes DIR            the bytes of the files under DIR (a carried folder)
#   travel_largest ROOT [N]            the N (default 5) largest tracked files: "BYTES PATH" lines
#   travel_largest_in DIR [N]          the N (default 3) largest files under DIR, the same way
#   travel_kib BYTES                   BYTES in KiB, rounded up

travel_limit_bytes() { echo "${BRICKDL_DEVICE_TRAVEL_LIMIT:-$((64 * 1024 * 1024))}"; }

travel_kib() { echo $((($1 + 1023) / 1024)); }

# Sizes of NUL-separated paths (relative to the current folder) on stdin, summed; paths that
# are gone (a tracked file deleted in the working tree does not travel) count nothing.
travel_sum_sizes() {
  xargs -0 -r stat -c %s -- 2>/dev/null | awk '{s += $1} END {printf "%d\n", s}'
}

travel_tree_bytes() {
  local root=$1 skip=${2:-} tracked untracked shared=0 rel
  git -C "$root" rev-parse --is-inside-work-tree >/dev/null 2>&1 || {
    echo "travel: $root is not a git checkout: what the device tool would carry is unknown" >&2
    return 1
  }
  root=$(cd "$root" && pwd)
  tracked=$(cd "$root" && git ls-files -z | travel_sum_sizes)
  # shared/: counted whole, unless git tracks it (then its files are counted above).
  local excludes=()
  if [ -d "$root/shared" ] && [ -z "$(git -C "$root" ls-files -- shared | head -1)" ]; then
    shared=$(travel_folder_bytes "$root/shared")
    excludes+=(":(exclude)shared")
  fi
  if [ -n "$skip" ] && [ -d "$skip" ]; then
    skip=$(cd "$skip" && pwd)
    case "$skip/" in "$root"/*)
      rel=${skip#"$root"/}
      excludes+=(":(exclude)$rel") ;;
    esac
  fi
  untracked=$(cd "$root" && git ls-files -z --others --exclude-standard -- . "${excludes[@]}" |
    travel_sum_sizes)
  echo $((tracked + untracked + shared))
}

travel_folder_bytes() { find "$1" -type f -print0 | travel_sum_sizes; }

# The N largest of NUL-separated paths on stdin, as "BYTES PATH" lines. (awk reads all of
# sort's output: head's early exit would end the pipe with SIGPIPE, which a caller's pipefail
# turns into a failure.)
travel_top() {
  xargs -0 -r stat -c '%s %n' -- 2>/dev/null | sort -rn | awk -v n="$1" 'NR <= n'
}

travel_largest() { (cd "$1" && git ls-files -z | travel_top "${2:-5}"); }

travel_largest_in() { find "$1" -type f -print0 | travel_top "${2:-3}"; }
