"""How the figures find their runs: by experiment name, else by model name (a renamed copy
of an experiment file, or one tuned with overrides), Fig 8 by its 'subgraph N' labels; one
GPU spec and precision per figure, picked deterministically or by --gpu / --precision /
--batch; each checked on small databases built here."""
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, RESULTS)

import figdata as fd  # noqa: E402
import synthetic_db  # noqa: E402


def model_run(b, target, experiment, model, spec="A100-40GB", precision="fp32", batch=8,
              plan_ms=3.0, overrides=None, status="complete", label=""):
    """A one-group run with a plan: layerwise 4 ms, the plan `plan_ms` (padded)."""
    config = {"overrides": overrides} if overrides else {}
    run = b.run(experiment, model, target, batch=batch, status=status, config=config,
                spec=spec, precision=precision)
    w = b.workload(2)
    lw = b.candidate(w, "layerwise")
    b.prediction(lw, time=4, dram=2, compute=1, spec=spec)
    p = b.candidate(w, "padded")
    b.prediction(p, time=plan_ms, dram=1, compute=1, spec=spec)
    b.group(run, w, 1, 2, label)
    b.plan(run, "predicted", plan_ms, 4, [(p, 1, 2)])
    return run


class RunFindingTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.path = os.path.join(self.tmp.name, "runs.db")
        self.b = synthetic_db.Builder(self.path)
        self.t = self.b.target("model:A100-40GB", "none")

    def open(self):
        self.b.close()
        conn = fd.open_db(self.path)
        self.addCleanup(conn.close)
        return conn

    def test_renamed_copy_with_overrides_is_found_by_model_name(self):
        # `brickdl-tune resnet50.yaml --target H200` run from a renamed copy of the file.
        run = model_run(self.b, self.t, "resnet50_h200", "resnet50", spec="H200",
                        overrides={"gpu": "H200", "batch": 8})
        conn = self.open()
        found = fd.fig7_runs(conn)
        self.assertEqual(found.best("resnet50").id, run)
        self.assertEqual(found.config, ("H200", "fp32"))
        self.assertIsNone(found.best("vgg16_bn"))
        data = fd.fig7_data(conn, found=found)
        self.assertAlmostEqual(data["resnet50"].plan.total, 3 / 4)
        text = "\n".join(found.describe({"resnet50": found.best("resnet50")}))
        self.assertIn("found by model name (no run of the experiment's own name): "
                      f"resnet50 = run {run} 'resnet50_h200'", text)
        self.assertIn("tuned with overrides: resnet50: batch=8, gpu=H200", text)

    def test_the_experiments_own_name_wins_over_a_later_renamed_copy(self):
        own = model_run(self.b, self.t, "resnet50", "resnet50")
        model_run(self.b, self.t, "resnet50_copy", "resnet50")
        found = fd.fig7_runs(self.open())
        self.assertEqual(found.best("resnet50").id, own)
        self.assertFalse(found.by_other_name(found.best("resnet50")))

    def test_a_subgraph_run_is_fig8s_and_fig7s_last_choice(self):
        plain = model_run(self.b, self.t, "resnet50_renamed", "resnet50")
        labelled = model_run(self.b, self.t, "my_subgraphs", "resnet50", label="subgraph 1")
        model_run(self.b, self.t, "vgg_labelled", "vgg16_bn", label="subgraph 1")
        conn = self.open()
        # Fig 7: of two runs found by model name, the one without subgraph labels (older).
        self.assertEqual(fd.fig7_runs(conn).best("resnet50").id, plain)
        # Fig 8: only a ResNet-50 run labelled 'subgraph N' qualifies (not vgg16_bn's).
        found = fd.fig8_runs(conn)
        self.assertEqual([r.id for r in found.runs["fig8"]], [labelled])
        self.assertEqual([s.label for s in fd.subgraph_data(conn, found.best("fig8"))],
                         ["subgraph 1"])

    def test_the_spec_with_most_experiments_wins_and_gpu_chooses(self):
        a_resnet = model_run(self.b, self.t, "resnet50", "resnet50")
        a_vgg = model_run(self.b, self.t, "vgg16_bn", "vgg16_bn")
        h_resnet = model_run(self.b, self.t, "resnet50", "resnet50", spec="H200",
                             overrides={"gpu": "H200"})  # the latest run
        conn = self.open()
        found = fd.fig7_runs(conn)
        # A100-40GB covers two of the seven, H200 one: A100-40GB although H200's is later.
        self.assertEqual(found.config, ("A100-40GB", "fp32"))
        self.assertEqual(found.other_configs, [("H200", "fp32")])
        self.assertEqual((found.best("resnet50").id, found.best("vgg16_bn").id),
                         (a_resnet, a_vgg))
        lines = found.describe({"resnet50": found.best("resnet50")})
        self.assertIn("picked model spec A100-40GB · fp32 (most of the figure's experiments, "
                      "then the latest run); also in the database: H200 · fp32; choose with "
                      "--gpu / --precision", lines)
        found = fd.fig7_runs(conn, fd.RunFilter(gpu_spec="h200"))  # case-insensitive
        self.assertEqual(found.config, ("H200", "fp32"))
        self.assertEqual(found.best("resnet50").id, h_resnet)
        self.assertIsNone(found.best("vgg16_bn"))
        self.assertIn("runs restricted by --gpu h200", found.describe({}))

    def test_a_tie_goes_to_the_latest_complete_run(self):
        model_run(self.b, self.t, "resnet50", "resnet50", precision="fp32")
        tf32 = model_run(self.b, self.t, "resnet50", "resnet50", precision="tf32")
        model_run(self.b, self.t, "resnet50", "resnet50", precision="bf16", status="aborted")
        conn = self.open()
        found = fd.fig7_runs(conn)
        self.assertEqual(found.config, ("A100-40GB", "tf32"))
        self.assertEqual(found.best("resnet50").id, tf32)
        self.assertEqual(found.other_configs, [("A100-40GB", "bf16"), ("A100-40GB", "fp32")])
        found = fd.fig7_runs(conn, fd.RunFilter(precision="fp32"))
        self.assertEqual(found.best("resnet50").precision, "fp32")

    def test_several_batches_latest_wins_and_batch_chooses(self):
        b8 = model_run(self.b, self.t, "resnet50", "resnet50", batch=8)
        b1 = model_run(self.b, self.t, "resnet50", "resnet50", batch=1,
                       overrides={"batch": 1})
        conn = self.open()
        found = fd.fig7_runs(conn)
        self.assertEqual(found.best("resnet50").id, b1)
        self.assertIn("several batches: resnet50 batch 1 (latest; also 8: --batch)",
                      found.describe({"resnet50": found.best("resnet50")}))
        found = fd.fig7_runs(conn, fd.RunFilter(batch=8))
        self.assertEqual(found.best("resnet50").id, b8)

    def test_target_prefix_restricts_before_anything_else(self):
        t_cpu = self.b.target("cpu:X", "cpu")
        model_run(self.b, self.t, "resnet50", "resnet50")
        cpu = model_run(self.b, t_cpu, "resnet50", "resnet50", spec="H200")
        conn = self.open()
        found = fd.fig7_runs(conn, fd.RunFilter(target_prefix="cpu:"))
        self.assertEqual(found.best("resnet50").id, cpu)
        self.assertEqual(found.other_configs, [])
        self.assertIsNone(fd.fig7_runs(conn, fd.RunFilter(target_prefix="gpu:")).config)

    def test_micro_runs_measured_panel_then_model_panel(self):
        t_cpu = self.b.target("cpu:X", "cpu")
        model_only = self.b.run("micro_bricksize", "micro_bricksize", self.t, batch=1)
        cpu = self.b.run("bricks_renamed", "micro_bricksize", t_cpu, batch=1)
        self.b.run("micro_graphsize", "micro_graphsize", self.t, batch=1)
        conn = self.open()
        self.assertEqual([r.id for r in fd.micro_runs(fd.fig11_runs(conn), "fig11")],
                         [cpu, model_only])
        runs = fd.micro_runs(fd.fig10_runs(conn), "fig10")
        self.assertEqual([r.backend for r in runs], ["none"])

    def test_fig12_follows_the_filter(self):
        t_gpu = self.b.target("gpu:X", "cuda")
        for spec, ms in (("A100-40GB", 2.0), ("H200", 1.0)):
            run = self.b.run("e", "m", t_gpu, spec=spec)
            w = self.b.workload(1)
            c = self.b.candidate(w, "padded")
            self.b.prediction(c, time=ms, spec=spec)
            self.b.measurement(c, t_gpu, run, ms * 3)
        conn = self.open()
        self.assertEqual(len(fd.fig12_data(conn)), 2)
        points = fd.fig12_data(conn, run_filter=fd.RunFilter(gpu_spec="H200"))
        self.assertEqual([(p.predicted_ms, p.measured_ms) for p in points], [(1.0, 3.0)])

    def test_overrides_of_a_run(self):
        run = fd.Run(id=1, experiment="e", model="m", batch=8, precision="fp32",
                     gpu_spec="H200", target_id=1, target="t", backend="none",
                     status="complete", config_json=json.dumps(
                         {"overrides": {"gpu": "H200", "input_size": [64, 64, 64]}}))
        self.assertEqual(run.overrides, {"gpu": "H200", "input_size": [64, 64, 64]})
        for text in ("{}", "not json", '{"overrides": "gpu"}', "[1]"):
            self.assertEqual(dataclasses.replace(run, config_json=text).overrides, {}, text)


class GpuOptionTest(unittest.TestCase):
    def test_gpu_option_of_the_figure_command(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "runs.db")
            b = synthetic_db.Builder(path)
            t = b.target("model:A100-40GB", "none")
            a100 = model_run(b, t, "resnet50", "resnet50")
            h200 = model_run(b, t, "resnet50_h200", "resnet50", spec="H200", plan_ms=2.0,
                             overrides={"gpu": "H200"})
            b.close()
            out = os.path.join(tmp, "figs")
            for args, run, plan in (([], h200, 0.5), (["--gpu", "A100-40GB"], a100, 0.75)):
                r = subprocess.run([sys.executable, os.path.join(RESULTS, "figures.py"), path,
                                    out, "--only", "fig7", "--formats", "png", *args],
                                   capture_output=True, text=True, timeout=120)
                self.assertEqual(r.returncode, 0, r.stderr)
                with open(os.path.join(out, "figures.json")) as f:
                    summary = json.load(f)
                self.assertEqual(summary["fig7"]["resnet50"]["run"]["run_id"], run)
                self.assertAlmostEqual(summary["fig7"]["resnet50"]["plan"]["total"], plan)


if __name__ == "__main__":
    unittest.main()
