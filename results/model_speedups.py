#!/usr/bin/python3
"""The model-only end-to-end speedups of a set of tuning runs, as a committed record.

    model_speedups.py DB OUT.csv

reads every complete model-only run of DB (brickdl-tune --backend none; scripts/model-speedups.sh
makes them) and writes one row per run's latest predicted plan: the experiment, model, batch,
GPU spec and precision, the plan's and the layerwise baseline's predicted end-to-end times, the
speedup (layerwise / plan), and how many of the plan's groups are merged. Every number is the
analytic model's prediction with the GPU spec's guessed coefficients; nothing is measured.
scripts/readme-blocks.py renders README's table from the file.
"""
import csv
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import brickdl_store  # noqa: E402

COLUMNS = ["experiment", "model", "batch", "gpu", "precision", "plan_ms", "layerwise_ms",
           "speedup", "merged_groups", "groups", "git_revision"]


def rows(conn):
    """One dict per complete model-only run, in run order (its latest predicted plan)."""
    out = []
    query = """
        SELECT r.id, r.experiment, r.model, r.batch, r.gpu_spec, r.precision, r.git_revision,
               p.json, p.predicted_ms, p.layerwise_predicted_ms
        FROM runs r JOIN plans p ON p.run_id = r.id AND p.kind = 'predicted'
        WHERE r.status = 'complete' AND p.id = (SELECT MAX(id) FROM plans
                                                WHERE run_id = r.id AND kind = 'predicted')
        ORDER BY r.id"""
    for (_, experiment, model, batch, gpu, precision, git, plan_json, plan_ms,
         layerwise_ms) in conn.execute(query):
        groups = json.loads(plan_json)["groups"]
        merged = sum(1 for g in groups if g["strategy"] != "layerwise")
        out.append({"experiment": experiment, "model": model, "batch": batch, "gpu": gpu,
                    "precision": precision, "plan_ms": f"{plan_ms:.4f}",
                    "layerwise_ms": f"{layerwise_ms:.4f}",
                    "speedup": f"{layerwise_ms / plan_ms:.3f}", "merged_groups": merged,
                    "groups": len(groups), "git_revision": git})
    return out


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    db, out = argv
    try:
        conn = brickdl_store.open_db(db)
    except brickdl_store.StoreError as e:
        print(f"model_speedups.py: {e}", file=sys.stderr)
        return 2
    found = rows(conn)
    if not found:
        print(f"model_speedups.py: {db} has no complete model-only run", file=sys.stderr)
        return 2
    with open(out, "w", encoding="utf-8", newline="") as f:
        f.write("# Model-only end-to-end speedups: the analytic model's predictions with the GPU\n"
                "# specs' guessed coefficients (no GPU measured them), written by\n"
                "# results/model_speedups.py from the runs of scripts/model-speedups.sh.\n")
        w = csv.DictWriter(f, fieldnames=COLUMNS, lineterminator="\n")
        w.writeheader()
        w.writerows(found)
    print(f"model_speedups.py: {len(found)} runs -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
