#!/usr/bin/env python3
"""Compares the deterministic content of two tuning databases.

  scripts/compare-result-sets.py A.db B.db

What a rerun of the same experiments must reproduce exactly, whatever the machine's timing:
workloads (signatures, descriptions, MACs), candidates (keyed by their batch block too; a
schema-1 file has none, so its candidates count as bn = 1), every prediction and baseline
prediction (all columns; a file of schema 4 or older has no baseline predictions), the groups
of each run, runs' configurations, predicted plans, and the status and counters of every
measurement (but the counters that depend on thread timing: memo_hits and
memo_conflicts split the lookups by who got there first). Measured times, ids, timestamps and
the runs' experiment paths (they name the output folder) are left out. Exit 0: identical;
1: differences (the first few of each table are printed); 2: a file is not a tuning database.
"""
import sqlite3
import sys
import urllib.parse

TIMING_COUNTERS = ("memo_hits", "memo_conflicts", "cpu_threads")

QUERIES = {
    "workloads": "SELECT signature, num_layers, description, macs FROM workloads",
    "candidates": """SELECT w.signature, c.strategy, c.bd, c.bh, c.bw, c.cb, {bn}, {cl}, c.threads
                     FROM candidates c JOIN workloads w ON w.id = c.workload_id""",
    "predictions": """SELECT w.signature, c.strategy, c.bd, c.bh, c.bw, c.cb, {bn}, {cl}, c.threads, p.*
                      FROM predictions p JOIN candidates c ON c.id = p.candidate_id
                      JOIN workloads w ON w.id = c.workload_id""",
    "baseline predictions": """SELECT w.signature, b.*
                               FROM baseline_predictions b
                               JOIN workloads w ON w.id = b.workload_id""",
    "runs": """SELECT r.experiment, r.config_json, r.model, r.batch,
                      r.precision, r.gpu_spec, t.backend, r.status
               FROM runs r JOIN targets t ON t.id = r.target_id""",
    "run_groups": """SELECT r.experiment, w.signature, g.first_layer, g.last_layer,
                            g.layer_names, g.label
                     FROM run_groups g JOIN runs r ON r.id = g.run_id
                     JOIN workloads w ON w.id = g.workload_id""",
    "predicted plans": """SELECT r.experiment, p.json, p.predicted_ms, p.layerwise_predicted_ms
                          FROM plans p JOIN runs r ON r.id = p.run_id
                          WHERE p.kind = 'predicted'""",
    "measurements": """SELECT r.experiment, w.signature, c.strategy, c.bd, c.bh, c.bw, c.cb,
                              {bn}, {cl}, c.threads, m.status
                       FROM measurements m JOIN runs r ON r.id = m.run_id
                       JOIN candidates c ON c.id = m.candidate_id
                       JOIN workloads w ON w.id = c.workload_id""",
    "counters": """SELECT r.experiment, w.signature, c.strategy, c.bd, c.bh, c.bw, c.cb,
                          {bn}, {cl}, c.threads, k.name, k.value
                   FROM counters k JOIN measurements m ON m.id = k.measurement_id
                   JOIN runs r ON r.id = m.run_id JOIN candidates c ON c.id = m.candidate_id
                   JOIN workloads w ON w.id = c.workload_id
                   WHERE k.name NOT IN ({names})""".replace(
        "{names}", ", ".join(f"'{n}'" for n in TIMING_COUNTERS)),
}


def rows(path, sql):
    # Leave out id columns of joined rows (candidate_id): they depend on insertion order.
    uri = "file:" + urllib.parse.quote(path) + "?mode=ro"
    conn = sqlite3.connect(uri, uri=True)
    try:
        # Schema version 1 has no batch block column: its candidates computed one image per
        # unit of work, so they compare equal to version-2 rows with bn = 1.
        # Before version 4 no cluster column: one CTA per unit (cl = 1).
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "baseline_predictions" in sql and "baseline_predictions" not in tables:
            return []  # schema 4 and older: no baseline predictions
        cols = {r[1] for r in conn.execute("PRAGMA table_info(candidates)")}
        cur = conn.execute(sql.replace("{bn}", "c.bn" if "bn" in cols else "1 AS bn")
                           .replace("{cl}", "c.cl" if "cl" in cols else "1 AS cl"))
        names = [d[0] for d in cur.description]
        keep = [i for i, n in enumerate(names) if not n.endswith("id")]
        return sorted(tuple(r[i] for i in keep) for r in cur.fetchall())
    finally:
        conn.close()


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[2].strip())
        return 2
    a, b = sys.argv[1:]
    different = False
    for table, sql in QUERIES.items():
        try:
            ra, rb = rows(a, sql), rows(b, sql)
        except sqlite3.DatabaseError as e:
            print(f"compare-result-sets: {table}: {e}")
            return 2
        only_a = sorted(set(ra) - set(rb))
        only_b = sorted(set(rb) - set(ra))
        if not only_a and not only_b and len(ra) == len(rb):
            print(f"{table}: {len(ra)} rows, identical")
            continue
        different = True
        print(f"{table}: {len(ra)} vs {len(rb)} rows; {len(only_a)} only in A, "
              f"{len(only_b)} only in B")
        for r in only_a[:3]:
            print(f"  A: {r}")
        for r in only_b[:3]:
            print(f"  B: {r}")
    return 1 if different else 0


if __name__ == "__main__":
    sys.exit(main())
