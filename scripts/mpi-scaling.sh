#!/usr/bin/env bash
# Wall time and candidates/s of one experiment tuned with 1, 2 and 3 MPI ranks (CPU backend),
# each from a fresh database, `repeats` times, and whether every run chose the same plan.
#   scripts/mpi-scaling.sh [EXPERIMENT.yaml] [OUT_DIR] [repeats]
# 1 rank is the plain run (one process measures); with N ranks, rank 0 tunes and N-1 workers
# measure. Prints a table (results/mpi/scaling.txt is this script's output). MPIRUN_ARGS adds
# options to mpirun (e.g. "--bind-to none").
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
exp=${1:-$root/experiments/mpi_scaling_cpu.yaml}
out=${2:-$root/out/mpi-scaling}
repeats=${3:-3}
tune=${BRICKDL_BUILD_DIR:-$root/build}/apps/brickdl-tune
command -v mpirun > /dev/null || { echo "mpi-scaling: mpirun not found (libopenmpi-dev openmpi-bin)" >&2; exit 77; }
[ -x "$tune" ] || { echo "mpi-scaling: build first ($tune missing)" >&2; exit 1; }
if [ "$(id -u)" -eq 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
rm -rf "$out" && mkdir -p "$out"

# The measured plan of a database: one line per group (layers, strategy, brick).
plan_of() {
  sqlite3 "$1" "SELECT pg.first_layer || '-' || pg.last_layer || ' ' || c.strategy || ' ' ||
                       c.bd || 'x' || c.bh || 'x' || c.bw FROM plan_groups pg
                JOIN plans p ON p.id = pg.plan_id JOIN candidates c ON c.id = pg.candidate_id
                WHERE p.kind = 'measured' ORDER BY pg.idx" | tr '\n' ';'
}

echo "experiment: $(basename "$exp"); $(nproc) cores; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "date: $(date -u +%Y-%m-%dT%H:%MZ); git $(git -C "$root" rev-parse --short=12 HEAD); mpirun $(mpirun --version | head -1 | awk '{print $NF}') --oversubscribe ${MPIRUN_ARGS:-}"
printf '%-6s %-4s %9s %10s %14s  %s\n' ranks rep "wall s" measured "candidates/s" "per worker (measured, busy s)"
for np in 1 2 3; do
  for rep in $(seq 1 "$repeats"); do
    db=$out/np$np-$rep.db
    cmd=("$tune" "$exp" --db "$db" --out "$out/np$np-$rep" --quiet)
    # shellcheck disable=SC2206 # MPIRUN_ARGS is split into words on purpose
    [ "$np" -gt 1 ] && cmd=(mpirun --oversubscribe ${MPIRUN_ARGS:-} -np "$np" "${cmd[@]}")
    t0=$(date +%s.%N)
    "${cmd[@]}" > "$out/np$np-$rep.txt" 2> "$out/np$np-$rep.err"
    t1=$(date +%s.%N)
    n=$(sqlite3 "$db" "SELECT COUNT(*) FROM measurements")
    workers=$(grep -E '^  rank [0-9]+ \(' "$out/np$np-$rep.txt" |
              sed -E 's/^  rank ([0-9]+) \([^)]*\): ([0-9]+) measured, [0-9]+ failed, ([0-9.]+) s busy.*/r\1 \2 \3s/' |
              tr '\n' ' ' || true)
    wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')
    printf '%-6s %-4s %9.2f %10s %14.3f  %s\n' "$np" "$rep" "$wall" "$n" \
      "$(awk -v n="$n" -v w="$wall" 'BEGIN { print n / w }')" "${workers:-in process}"
    plan_of "$db" > "$out/np$np-$rep.plan"
  done
done
echo
distinct=$(cat "$out"/*.plan | sort | uniq -c)
if [ "$(cat "$out"/*.plan | sort -u | wc -l)" -eq 1 ]; then
  echo "plans: every run chose the same plan: $(head -1 "$out/np1-1.plan")"
else
  echo "plans: the runs chose $(cat "$out"/*.plan | sort -u | wc -l) different plans (count, plan):"
  echo "$distinct"
fi
