"""brickdl.tune against brickdl-tune: the same plan, the same figure and the same database rows
for the same experiment; settings, progress, the GIL, Ctrl-C and errors."""
import os
import signal
import subprocess
import sys
import textwrap
import threading

import pytest

import brickdl
from conftest import CHAIN_YAML, cli, cli_error, read_json, source, stable


def end_to_end_speedup(report_text):
    """The figure of the report's 'end to end (model): ... speedup 1.320x' line."""
    line = [ln for ln in report_text.splitlines() if ln.startswith("end to end (model):")][0]
    return line.rsplit("speedup ", 1)[1].rstrip("x")


def test_the_one_liner_prints_the_figure_of_brickdl_tune_for_the_same_model(in_tmp):
    # The README's one-liner, in a fresh interpreter.
    code = ("import brickdl; print(brickdl.tune(brickdl.Model.zoo('resnet50', batch=8), "
            "target='H200', precision='tf32', backend='none').speedup)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       cwd=in_tmp, timeout=300)
    assert r.returncode == 0, r.stderr
    py = float(r.stdout)
    out = cli("brickdl-tune", "resnet50", "--batch", "8", "--target", "H200", "--precision",
              "tf32", "--backend", "none", "--db", "cli.db", "--out", "cli", cwd=in_tmp)
    assert f"{py:.3f}" == end_to_end_speedup(out.stdout)
    plan = read_json(in_tmp / "cli" / "plan.json")["plan"]
    assert py == plan["layerwise_predicted_ms"] / plan["predicted_ms"]


def test_plan_json_and_database_rows_equal_the_clis(in_tmp):
    exp = source("experiments", "resnet50.yaml")
    plan = brickdl.tune(brickdl.Model.experiment(exp), target="H200", precision="tf32",
                        backend="none", db="py.db", out="py")
    out = cli("brickdl-tune", exp, "--target", "H200", "--precision", "tf32", "--backend",
              "none", "--db", "cli.db", "--out", "cli", cwd=in_tmp)
    assert stable(read_json(in_tmp / "py" / "plan.json")) == stable(
        read_json(in_tmp / "cli" / "plan.json"))
    assert stable(plan.report) == stable(read_json(in_tmp / "cli" / "plan.json"))
    assert f"{plan.speedup:.3f}" == end_to_end_speedup(out.stdout)
    assert plan.run_id == 1 and plan.status == "complete" and plan.target == "model:H200"
    py, c = brickdl.Database("py.db"), brickdl.Database("cli.db")
    assert py.predictions().equals(c.predictions())
    assert py.best().equals(c.best())
    keep = ["id", "experiment", "model", "batch", "precision", "target", "kind", "status",
            "measurements"]
    assert py.runs()[keep].equals(c.runs()[keep])


def test_the_plans_groups_tile_the_fused_graph_and_carry_bytes_per_level(in_tmp):
    model = brickdl.Model.zoo("resnet50", batch=8)
    plan = brickdl.tune(model, target="H200", precision="tf32", backend="none", db="g.db")
    fused = model.describe(fused=True)
    assert plan.groups[0].first_layer == 1 and plan.groups[-1].last_layer == len(fused) - 1
    for a, b in zip(plan.groups, plan.groups[1:]):
        assert b.first_layer == a.last_layer + 1
    assert sum(g.predicted_ms for g in plan.groups) == pytest.approx(plan.predicted_ms)
    merged = [g for g in plan.groups if g.strategy != "layerwise"]
    assert merged and all(g.brick and g.threads for g in merged)
    # The bytes per level are the chosen candidate's prediction, as the database holds it.
    preds = brickdl.Database("g.db").predictions(run=plan.run_id)
    for g in merged:
        # (rows name a workload's first group: the same workload may recur later)
        row = preds[(preds.description == g.workload) & (preds.time_ms == g.predicted_ms) &
                    (preds.strategy == g.strategy) & (preds.bh == g.brick["h"]) &
                    (preds.cb == g.brick["cb"]) & (preds.threads == g.threads) &
                    (preds.bn == g.brick.get("nb", 1))]
        # (two workloads may share a description and a prediction: residual adds of equal shape)
        assert len(row) >= 1, g
        assert set(zip(row.l1_bytes, row.l2_bytes, row.dram_bytes)) == {
            (g.l1_bytes, g.l2_bytes, g.dram_bytes)}
    df = plan.frame()
    assert list(df["speedup"]) == [g.speedup for g in plan.groups]
    assert plan.measured_ms is None and plan.measured_speedup is None
    assert plan.paper_speedup > plan.speedup > 1


def test_search_overrides_equal_the_same_keys_in_an_experiment_file(in_tmp):
    model = brickdl.Model.zoo("resnet50", batch=8)
    plan = brickdl.tune(model, target="H200", backend="none", db="py.db", brick_sizes=[8],
                        strategies=["layerwise", "padded"], max_group_len=2, threads=[256])
    merged = [g for g in plan.groups if g.strategy != "layerwise"]
    assert merged and all(g.strategy == "padded" and g.brick["h"] == 8 for g in merged)
    assert all(g.last_layer - g.first_layer < 2 for g in plan.groups)
    (in_tmp / "same.yaml").write_text(textwrap.dedent("""\
        name: resnet50
        model: resnet50
        batch: 8
        target: H200
        search: {brick_sizes: [8], strategies: [layerwise, padded], max_group_len: 2,
                 threads: [256]}
        """))
    cli("brickdl-tune", "same.yaml", "--backend", "none", "--db", "cli.db", "--out", "cli",
        cwd=in_tmp)
    assert stable(plan.report["plan"]) == stable(read_json(in_tmp / "cli" / "plan.json")["plan"])


def test_a_cpu_tune_reports_progress_and_releases_the_gil(in_tmp, chain_experiment):
    events = []
    ticks = [0]
    stop = threading.Event()

    def count():  # runs only while tune() does not hold the GIL
        while not stop.is_set():
            ticks[0] += 1
            stop.wait(0.005)

    t = threading.Thread(target=count)
    t.start()
    try:
        plan = brickdl.tune(brickdl.Model.experiment(chain_experiment), db="t.db",
                            progress=events.append)
    finally:
        stop.set()
        t.join()
    report = plan.report["measurements"]
    assert report["measured"] > 0 and len(events) == report["measured"] + report["resumed"]
    assert [e["done"] for e in events] == list(range(1, len(events) + 1))
    assert all(e["status"] == "ok" and e["median_ms"] > 0 for e in events)
    assert ticks[0] > 10, "the counting thread never ran while tune() worked"
    assert plan.measured_ms is not None and plan.target.startswith("cpu:")
    assert all(g.speedup_measured for g in plan.groups)
    assert plan.measured_speedup == plan.layerwise_measured_ms / plan.measured_ms
    ms = brickdl.Database("t.db").measurements(run=plan.run_id)
    assert len(ms) == report["measured"] and set(ms["status"]) == {"ok"}


def test_an_exception_in_the_callback_stops_the_run_and_keeps_what_was_measured(
        in_tmp, chain_experiment):
    class Enough(Exception):
        pass

    def callback(e):
        if e["done"] == 2:
            raise Enough()

    with pytest.raises(Enough):
        brickdl.tune(brickdl.Model.experiment(chain_experiment), db="t.db", progress=callback)
    runs = brickdl.Database("t.db").runs()
    assert list(runs["status"]) == ["aborted"] and 2 <= runs["measurements"][0]


CTRL_C = """
import sys, brickdl
def started(e):
    if e["done"] == 1:
        print("started", flush=True)
try:
    brickdl.tune(brickdl.Model.experiment(sys.argv[1]), db="t.db", progress=started)
    print("finished")
except brickdl.Interrupted as e:
    print("interrupted", e.plan.run_id, e.plan.status, e.plan.aborted)
"""


def test_ctrl_c_stops_the_tune_cleanly(in_tmp, chain_experiment):
    # A larger chain and more repetitions: about 3 s of measuring after the first result on an
    # idle machine, so the signal arrives while the run is still measuring.
    chain_experiment.write_text(CHAIN_YAML.replace("image: 12", "image: 24")
                                .replace("repetitions: 3", "repetitions: 30"))
    p = subprocess.Popen([sys.executable, "-c", CTRL_C, str(chain_experiment)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=in_tmp)
    assert p.stdout.readline().strip() == "started"
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    assert out.split() == ["interrupted", "1", "aborted", "True"], out + err
    runs = brickdl.Database(in_tmp / "t.db").runs()
    assert list(runs["status"]) == ["aborted"] and runs["measurements"][0] >= 1


def test_bad_input_is_the_clis_error(in_tmp, chain_experiment):
    # fp16 on the CPU backend: brickdl-tune refuses it with this message.
    exp = chain_experiment.read_text().replace("batch: 1", "batch: 1\nprecision: fp16")
    chain_experiment.write_text(exp)
    with pytest.raises(brickdl.UserError) as e:
        brickdl.tune(brickdl.Model.experiment(chain_experiment), db="t.db")
    assert str(e.value) == cli_error("brickdl-tune", chain_experiment, "--db", "t.db",
                                     cwd=in_tmp)
    assert not os.path.exists(in_tmp / "t.db") or brickdl.Database("t.db").runs().empty
    with pytest.raises(brickdl.UserError, match="progress"):
        brickdl.tune(brickdl.Model.zoo("resnet50"), backend="none", db="x.db", progress=3)


def test_an_unreadable_database_is_a_user_error(in_tmp):
    (in_tmp / "bad.db").write_bytes(b"not a database at all" * 100)
    with pytest.raises(brickdl.UserError) as e:
        brickdl.tune(brickdl.Model.zoo("resnet50"), backend="none", db="bad.db")
    assert str(e.value) == cli_error("brickdl-tune", "resnet50", "--backend", "none", "--db",
                                     "bad.db", cwd=in_tmp)


def test_the_progress_line_counts_the_candidates_on_stderr(in_tmp, chain_experiment, capsys):
    plan = brickdl.tune(brickdl.Model.experiment(chain_experiment), db="t.db", progress="line")
    n = plan.report["measurements"]["measured"]
    err = capsys.readouterr().err
    last = err.rstrip("\n").split("\r")[-1]
    assert err.endswith("\n") and last.startswith(f"measure {n}/"), err
    assert "0 resumed  0 failed" in last
    # tqdm's bar when asked for a bar and tqdm is there; else the same line.
    again = brickdl.tune(brickdl.Model.experiment(chain_experiment), db="t.db", progress=True)
    assert again.report["measurements"]["resumed"] == n
    assert f"{n}/" in capsys.readouterr().err
