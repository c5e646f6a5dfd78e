# shellcheck shell=bash
# Sourced by the scripts (bash): long steps print one line each and a compact progress, their
# whole output goes to a log file, and a failure prints what went wrong and the log's path.
#
#   quiet_path PATH                   PATH relative to the current folder when inside it
#   quiet_log_dir BUILD               BUILD/logs (made when missing)
#   quiet_configure BUILD ARGS...     cmake -S <checkout> -B BUILD ARGS; log BUILD/logs/configure.log
#   quiet_build BUILD [TARGET...]     cmake --build BUILD [--target TARGET...] -j$BRICKDL_JOBS;
#                                     log BUILD/logs/build.log
#   quiet_warnings LOG                the compiler warnings of a build log, one a line
#
# The build shows its progress as one updating line on a terminal, else one line each time
# another tenth of the build has passed while compiling (a build with nothing to do prints only
# its last line). Every compiler warning is printed after the build, never only logged. On a
# failure the functions print the log without the progress lines (its last 60 lines) and return
# the command's status. BRICKDL_VERBOSE=1 prints the whole output as it comes (still logged).

quiet_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

quiet_path() {
  case $1 in
  "$PWD"/*) printf '%s\n' "${1#"$PWD"/}" ;;
  *) printf '%s\n' "$1" ;;
  esac
}

quiet_log_dir() {
  mkdir -p "$1/logs"
  printf '%s\n' "$1/logs"
}

# "0:07", "12:34".
quiet_elapsed() {
  local s=$((SECONDS - $1))
  printf '%d:%02d' $((s / 60)) $((s % 60))
}

# The lines of a compiler log that are warnings (GCC, Clang, nvcc, ptxas, CMake), without
# make's progress lines (a file named *warning* is no warning).
quiet_warnings() {
  grep -a -i -E 'warning( #[0-9]+-D)? ?:|^CMake Warning' "$1" |
    grep -a -v -E '^\[ *[0-9]+%\]|^\[[0-9]+/[0-9]+\]' || true
}

# The log without progress and directory lines: what a failure said.
quiet_failure_tail() {
  grep -a -v -E '^\[ *[0-9]+%\] (Building|Linking|Built target|Generating)|^\[[0-9]+/[0-9]+\] |^Consolidate compiler|make\[[0-9]+\]: (Entering|Leaving) directory' \
    "$1" | tail -n 60
}

quiet_configure() {
  local build=$1 start=$SECONDS log status
  shift
  log=$(quiet_log_dir "$build")/configure.log
  status=0
  if [[ ${BRICKDL_VERBOSE:-0} == 1 ]]; then
    cmake -S "$quiet_root" -B "$build" "$@" 2>&1 | tee "$log" || status=${PIPESTATUS[0]}
  else
    cmake -S "$quiet_root" -B "$build" "$@" >"$log" 2>&1 || status=$?
  fi
  if ((status != 0)); then
    quiet_failure_tail "$log"
    echo "brickdl: configuring $(quiet_path "$build")/ failed (cmake exit $status); the whole" \
      "output is in $(quiet_path "$log")"
    return "$status"
  fi
  local facts
  facts=$(sed -n 's/^-- brickdl: //p' "$log" | paste -sd ',' - | sed 's/,/, /g')
  echo "brickdl: configured $(quiet_path "$build")/ in $((SECONDS - start)) s" \
    "(${facts:+$facts; }log: $(quiet_path "$log"))"
  quiet_warnings "$log"
}

# Reads a build's output on stdin and shows its progress (see the top of this file).
quiet_progress() {
  local start=$SECONDS tty=0 line pct shown=0 fresh=0 what text cols=80
  if [[ -t 1 && ${BRICKDL_VERBOSE:-0} != 1 ]]; then
    tty=1
    cols=$(tput cols 2>/dev/null || echo 80) # a longer line would wrap and leave copies
  fi
  while IFS= read -r line; do
    [[ ${BRICKDL_VERBOSE:-0} == 1 ]] && printf '%s\n' "$line"
    if [[ $line =~ ^\[\ *([0-9]+)%\]\ (.*)$ ]]; then
      pct=${BASH_REMATCH[1]}
      what=${BASH_REMATCH[2]}
    elif [[ $line =~ ^\[([0-9]+)/([0-9]+)\]\ (.*)$ ]]; then # Ninja
      pct=$((100 * BASH_REMATCH[1] / BASH_REMATCH[2]))
      what=${BASH_REMATCH[3]}
    else
      continue
    fi
    [[ $what == Building* ]] && fresh=1
    if ((tty)); then
      # "Building CXX object core/CMakeFiles/brickdl_core.dir/graph.cpp.o" -> core/graph.cpp
      what=${what#Building * object }
      what=${what/CMakeFiles\/*.dir\//}
      printf -v text 'brickdl: building %3d%%  %s  %s' "$pct" "$(quiet_elapsed "$start")" \
        "${what%.o}"
      printf '\r%s\e[K' "${text:0:cols-1}"
      shown=1
    elif ((fresh && pct / 10 > shown / 10)); then
      shown=$((pct / 10 * 10))
      fresh=0
      echo "brickdl: building $shown%  $(quiet_elapsed "$start")"
    fi
  done
  if ((tty && shown)); then printf '\r\e[K'; fi
}

quiet_build() {
  local build=$1 start=$SECONDS log status warnings compiled nwarn
  shift
  log=$(quiet_log_dir "$build")/build.log
  local args=(--build "$build" -j"${BRICKDL_JOBS:-2}")
  (($#)) && args+=(--target "$@")
  if cmake "${args[@]}" 2>&1 | tee "$log" | quiet_progress; then
    status=0
  else
    status=${PIPESTATUS[0]}
  fi
  if ((status != 0)); then
    quiet_failure_tail "$log"
    echo "brickdl: building $(quiet_path "$build")/ failed (exit $status) after" \
      "$(quiet_elapsed "$start"); the whole output is in $(quiet_path "$log")"
    return "$status"
  fi
  warnings=$(quiet_warnings "$log")
  if [[ -n $warnings ]]; then
    echo "brickdl: the compiler warned:"
    printf '%s\n' "$warnings" | head -n 40
  fi
  compiled=$(grep -a -c -E '^\[ *[0-9]+%\] Building|^\[[0-9]+/[0-9]+\] Building' "$log" || true)
  nwarn=$(printf '%s' "$warnings" | grep -c . || true)
  echo "brickdl: built $(quiet_path "$build")/${1:+ (${*})} in $(quiet_elapsed "$start"):" \
    "$compiled files compiled, $nwarn warning$( ((nwarn == 1)) || echo s)" \
    "(log: $(quiet_path "$log"))"
}
