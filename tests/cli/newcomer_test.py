#!/usr/bin/env python3
"""Runs scripts/newcomer.sh (a newcomer's tour: tune, best, show, compare, accuracy, export,
merge) into a fresh folder and checks what a newcomer reads:

- no output holds a placeholder (an unfilled "N KiB", "{}", "nan");
- no section of `best` mixes sources or targets: every row sits under the heading of its own
  source and target, measured rows on a measuring target, predictions under "model:<spec>";
- a validation (a CPU check of a GPU plan) never appears as a time: not in `best`, not in
  `accuracy`, not in the export's times, and `compare` refuses a validation run;
- the answers the tour asks for are there: layerwise times for merged groups, resumed
  measurements counted by `compare`, the one-line question for one layer, the overrides, the
  subgraphs of the Fig 8 experiment named in its report, the report's legend;
- the numbers a reader can check without the code: a prediction worked out by hand from the
  model's documented formula, each best the least of what the export lists for its group,
  each speedup layerwise / best.

Usage: newcomer_test.py SOURCE_DIR BUILD_DIR [WORK_DIR]
"""
import csv
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import unittest

SOURCE, BUILD = sys.argv[1], sys.argv[2]
WORK = sys.argv[3] if len(sys.argv) > 3 else None

PLACEHOLDERS = [
    re.compile(r"\bN (KiB|MiB|MB|GB|ms)\b"),
    re.compile(r"\{\}|\{:[^}]*\}"),
    re.compile(r"\b(nan|NaN|inf)\b"),
]


class Tour(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = WORK or tempfile.mkdtemp(prefix="brickdl-newcomer-")
        cls.out = os.path.join(cls.tmp, "tour")
        env = dict(os.environ, BRICKDL_BUILD_DIR=BUILD)
        done = subprocess.run([os.path.join(SOURCE, "scripts", "newcomer.sh"), cls.out], env=env,
                              cwd=SOURCE, capture_output=True, text=True, timeout=900)
        if done.returncode != 0:
            raise AssertionError(f"newcomer.sh failed ({done.returncode}):\n{done.stdout}\n"
                                 f"{done.stderr}")
        cls.steps = {}
        for name in sorted(os.listdir(cls.out)):
            m = re.match(r"\d\d-(.+)\.txt$", name)
            if m:
                with open(os.path.join(cls.out, name), encoding="utf-8") as f:
                    cls.steps[m.group(1)] = f.read()
        cls.db = os.path.join(cls.out, "tour.db")

    @classmethod
    def tearDownClass(cls):
        if not WORK:
            shutil.rmtree(cls.tmp, ignore_errors=True)

    def query(self, *args):
        return subprocess.run([os.path.join(BUILD, "apps", "brickdl-query"), "--db", self.db,
                               *args], capture_output=True, text=True, timeout=120)

    # ---- every output ----------------------------------------------------------------------

    def test_every_step_ran_and_printed(self):
        self.assertGreaterEqual(len(self.steps), 19)
        for name, text in self.steps.items():
            if name not in ("export", "merge"):
                self.assertTrue(text.strip(), f"step {name} printed nothing")

    def test_no_placeholder_anywhere(self):
        for name, text in self.steps.items():
            for line in text.splitlines():
                for p in PLACEHOLDERS:
                    self.assertIsNone(p.search(line), f"{name}: placeholder in: {line}")

    # ---- best: one kind of number per section ------------------------------------------------

    def best_rows(self):
        return json.loads(self.steps["best-json"])

    def sections(self, text):
        """Heading → body of each section of `best`'s text (blank-line separated)."""
        out = {}
        for block in text.split("\n\n"):
            lines = block.splitlines()
            if lines and lines[0].endswith(":") and not lines[0].startswith(" "):
                out[lines[0]] = "\n".join(lines[1:])
        return out

    def test_best_sections_keep_sources_and_targets_apart(self):
        rows = self.best_rows()
        sections = self.sections(self.steps["best"])
        kinds = {r["kind"] for r in rows}
        self.assertEqual(kinds, {"measured (CPU)", "predicted (model)"})
        for r in rows:
            self.assertNotIn("#validation", r["target"])
            if r["kind"] == "predicted (model)":
                self.assertTrue(r["target"].startswith("model:"), r)
                self.assertIsNone(r["measurement"])
                heading = f"predicted by the model for {r['target'][len('model:'):]} ("
            else:
                self.assertTrue(r["target"].startswith("cpu:"), r)
                self.assertEqual(r["source"], "measured")
                heading = f"measured (CPU) on {r['target']} ("
            mine = [h for h in sections if h.startswith(heading)]
            self.assertEqual(len(mine), 1, f"{heading} in {list(sections)}")
            body = sections[mine[0]]
            group = r["groups"][0]["layer_names"]
            line = next((l for l in body.splitlines()
                         if group in l and f"{r['time_ms']:.4f}" in l), None)
            self.assertIsNotNone(line, f"{group} {r['time_ms']:.4f} not under {mine[0]}")
        # The same workload measured on the CPU and predicted for the A100: two rows, two
        # sections, never one column.
        headings = list(sections)
        self.assertTrue(any(h.startswith("measured (CPU) on cpu:") for h in headings))
        self.assertTrue(any(h.startswith("predicted by the model for A100-40GB") for h in headings))
        self.assertTrue(any(h.startswith("predicted by the model for H200") for h in headings))

    def test_merged_groups_have_a_layerwise_time_from_their_own_source(self):
        for r in self.best_rows():
            if r["workload"]["num_layers"] > 1 and r["model"] == "micro_graphsize":
                self.assertIsNotNone(r["layerwise_ms"], r["groups"][0]["layer_names"])
                self.assertGreater(r["speedup_vs_layerwise"], 0)
        # Measured rows take measured layerwise times: the CPU's milliseconds, not the A100's.
        cpu = [r for r in self.best_rows() if r["kind"] == "measured (CPU)"]
        self.assertTrue(all(r["layerwise_ms"] > 1.0 for r in cpu), cpu)
        model = [r for r in self.best_rows() if r["target"] == "model:A100-40GB"
                 and r["model"] == "micro_graphsize"]
        self.assertTrue(model and all(r["layerwise_ms"] < 1.0 for r in model))
        # The paper's unfused baseline is predicted, and never cheaper than cuDNN fused.
        for r in model:
            self.assertGreaterEqual(r["paper_layerwise_ms"], r["layerwise_ms"])

    def test_one_line_answer_for_one_layer(self):
        text = self.steps["best-layer"]
        sections = self.sections(text)
        self.assertEqual(len(sections), 1, text)
        heading, body = next(iter(sections.items()))
        self.assertTrue(heading.startswith("predicted by the model for H200"), heading)
        rows = [l for l in body.splitlines()[2:] if l.strip()]
        self.assertGreater(len(rows), 1)
        for line in rows:
            self.assertIn("layer3.0.", line)
            self.assertIn(" tf32 ", line)
        self.assertEqual(sum(1 for l in rows if l.rstrip().endswith("yes")), 1, body)

    # ---- validations are no times ------------------------------------------------------------

    def validation_run(self):
        with sqlite3.connect(self.db) as c:
            (run,) = c.execute("SELECT r.id FROM runs r JOIN targets t ON t.id = r.target_id "
                               "WHERE t.fingerprint LIKE '%#validation'").fetchone()
        return run

    def test_validations_are_never_times(self):
        run = self.validation_run()
        self.assertIn("validated (CPU)", self.steps["runs"])
        show = self.steps["show-validation"]
        self.assertIn("validations (1): ok 1", show)
        self.assertNotIn("median_ms", show)
        self.assertNotIn("#validation", self.steps["accuracy"])
        for s in json.loads(self.steps["accuracy-json"]):
            self.assertNotIn("#validation", s["target"])
        with open(os.path.join(self.out, "export.csv"), newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
        validations = [r for r in rows if r["measurement_kind"] == "validation"]
        self.assertEqual(len(validations), 1)
        for r in validations:
            self.assertEqual(int(r["run_id"]), run)
            for col in ("median_ms", "min_ms", "max_ms", "p25_ms", "p75_ms"):
                self.assertEqual(r[col], "", col)
            self.assertEqual(r["status"], "ok")
        refused = self.query("compare", "1", str(run))
        self.assertEqual(refused.returncode, 2, refused.stdout)
        self.assertIn("has no timings (validated (CPU)", refused.stderr)

    # ---- compare counts what it resumed --------------------------------------------------------

    def test_compare_counts_resumed_measurements(self):
        text = self.steps["compare"]
        self.assertRegex(text, r"run A = 1: .*; 14 ok measurements of its own, 0 resumed")
        self.assertRegex(text, r"run B = 2: .*; 0 ok measurements of its own, 14 resumed "
                               r"from earlier runs on its target")
        self.assertIn("geometric mean B/A 1.000", text)
        self.assertIn(" run 1 ", text)  # B's best of each workload came from run 1
        own = self.steps["compare-own"]
        self.assertIn("--own: resumed ones left out", own)
        self.assertIn("no workload has an ok measurement in both runs (5 only in A", own)

    # ---- accuracy -------------------------------------------------------------------------------

    def test_accuracy_labels_what_it_compares(self):
        sets = json.loads(self.steps["accuracy-json"])
        self.assertEqual(len(sets), 1)
        s = sets[0]
        self.assertEqual(s["gpu_spec"], "A100-40GB")
        self.assertTrue(s["target"].startswith("cpu:"))
        self.assertEqual(s["time"]["n"], len(s["points"]))
        self.assertGreater(s["time"]["n"], 10)
        self.assertIsNotNone(s["time"]["spearman"])
        # The CPU executor counts exactly what the model predicts for merged candidates.
        merged = [p for p in s["points"] if p["candidate"]["strategy"] != "layerwise"]
        self.assertTrue(merged)
        for p in merged:
            self.assertEqual(p["predicted_bytes"], p["measured_bytes"])
        text = self.steps["accuracy"]
        self.assertIn("predicted for A100-40GB", text)
        self.assertIn("the model predicts a GPU; these are CPU times", text)

    # ---- overrides, reports ---------------------------------------------------------------------

    def test_overrides_are_recorded_and_shown(self):
        with sqlite3.connect(self.db) as c:
            rows = c.execute("SELECT gpu_spec, precision, config_json FROM runs "
                             "WHERE experiment = 'resnet50' ORDER BY id").fetchall()
        self.assertEqual([(g, p) for g, p, _ in rows], [("A100-40GB", "fp32"), ("H200", "tf32")])
        self.assertNotIn("overrides", json.loads(rows[0][2]))
        self.assertEqual(json.loads(rows[1][2])["overrides"], {"gpu": "H200", "precision": "tf32"})

    def test_subgraph_experiment_names_its_subgraphs(self):
        text = self.steps["tune-subgraphs"]
        for k in range(1, 8):
            self.assertIn(f"subgraph {k}", text)

    def test_reports_explain_their_columns(self):
        for step in ("tune-cpu", "tune-a100", "tune-inline"):
            text = self.steps[step]
            self.assertIn("\nlegend (", text, step)
            legend = text[text.index("\nlegend ("):]
            for word in ("xbound = DRAM MB / bound MB", "lw pred ", "speedup ", "marked *",
                         "pred ms "):
                self.assertIn(word, legend, f"{step}: {word}")
        # The same text in --help.
        done = subprocess.run([os.path.join(BUILD, "apps", "brickdl-tune"), "--help"],
                              capture_output=True, text=True, timeout=60)
        self.assertIn("xbound = DRAM MB / bound MB", done.stdout)

    # ---- numbers a reader can check ------------------------------------------------------------

    def export_rows(self):
        with open(os.path.join(self.out, "export.csv"), newline="", encoding="utf-8") as f:
            return list(csv.DictReader(f))

    # One layer of micro_graphsize_cpu by hand: a 3x3x3 conv, 3 -> 3 channels on 48^3, batch 1,
    # fp32, run layerwise on the A100-40GB. FLOPs = 2 MACs = 2 * 48^3 * 3 * 27 * 3. One kernel,
    # at the largest of its DRAM, L2 and compute times, plus one launch (model/cost_model.h,
    # model/detail/memory.h): compute at 19.5 TFLOP/s * 0.6 (the default efficiency) =
    # 0.00459 ms beats DRAM, input and output once (2 * 1327104 bytes) at 1555 GB/s * 0.85 =
    # 0.00201 ms; the A100's launch is 3 us.
    CONV_FLOPS = 2 * 48**3 * 3 * 27 * 3
    CONV_MS = CONV_FLOPS / (19.5e12 * 0.6) * 1e3 + 3e-3

    def test_a_prediction_worked_out_by_hand(self):
        singles = [r for r in self.export_rows() if r["model"] == "micro_graphsize"
                   and r["strategy"] == "layerwise" and r["num_layers"] == "1"]
        self.assertTrue(singles)
        for r in singles:
            self.assertEqual(r["gpu_spec"], "A100-40GB")
            self.assertEqual(float(r["pred_flops"]), self.CONV_FLOPS)
            self.assertAlmostEqual(float(r["pred_time_ms"]), self.CONV_MS, delta=1e-9)
        # In `best`, the model's layerwise time of a group of the chain is its layers' added up.
        model = [r for r in self.best_rows() if r["target"] == "model:A100-40GB"
                 and r["model"] == "micro_graphsize"]
        self.assertEqual(len(model), 6)
        for r in model:
            n = r["workload"]["num_layers"]
            self.assertAlmostEqual(r["layerwise_ms"], n * self.CONV_MS, delta=1e-9,
                                   msg=r["groups"][0]["layer_names"])

    def test_each_best_is_the_least_of_its_group(self):
        rows = self.export_rows()
        measured = [r for r in self.best_rows() if r["source"] == "measured"]
        self.assertTrue(measured)
        for b in measured:
            mine = [r for r in rows if int(r["workload_id"]) == b["workload"]["id"]
                    and r["target"] == b["target"] and r["status"] == "ok"
                    and r["measurement_kind"] == "timing"]
            least = min(mine, key=lambda r: float(r["median_ms"]))
            name = b["groups"][0]["layer_names"]
            self.assertEqual(b["time_ms"], float(least["median_ms"]), name)
            self.assertEqual(b["candidate"]["id"], int(least["candidate_id"]), name)
        # The model's best of each group of the CPU run: its least feasible prediction.
        done = self.query("predictions", "--run", "1", "--format", "json")
        self.assertEqual(done.returncode, 0, done.stderr)
        predictions = json.loads(done.stdout)
        model = [r for r in self.best_rows() if r["target"] == "model:A100-40GB"
                 and r["model"] == "micro_graphsize"]
        self.assertTrue(model)
        for b in model:
            times = [p["time_ms"] for p in predictions if p["workload_id"] == b["workload"]["id"]
                     and p["feasible"] == 1 and p["gpu_spec"] == "A100-40GB"]
            self.assertEqual(b["time_ms"], min(times), b["groups"][0]["layer_names"])

    def test_speedups_are_layerwise_over_best(self):
        rows = self.export_rows()
        # The chain's layers are one workload: its single-layer layerwise median on the CPU.
        single = [float(r["median_ms"]) for r in rows if r["model"] == "micro_graphsize"
                  and r["strategy"] == "layerwise" and r["num_layers"] == "1"
                  and r["status"] == "ok" and r["measurement_kind"] == "timing"]
        self.assertTrue(single)
        best_text = self.steps["best"]
        checked = 0
        for b in self.best_rows():
            if b["layerwise_ms"] is None:
                continue
            name = b["groups"][0]["layer_names"]
            if b["source"] == "measured" and b["model"] == "micro_graphsize":
                self.assertAlmostEqual(b["layerwise_ms"],
                                       b["workload"]["num_layers"] * min(single), places=9)
            speedup = b["layerwise_ms"] / b["time_ms"]
            self.assertAlmostEqual(b["speedup_vs_layerwise"], speedup, places=9, msg=name)
            # The table's row of this group and time prints the same speedup, to 2 decimals.
            line = next((l for l in best_text.splitlines()
                         if f" {name} " in l + " " and f" {b['time_ms']:.4f} " in l), None)
            if b["model"] == "micro_graphsize":
                self.assertIsNotNone(line, f"{name} {b['time_ms']:.4f}")
                shown = float(re.search(r" (\d+\.\d+)x( |$)", line).group(1))
                self.assertAlmostEqual(shown, speedup, delta=0.0051, msg=line)
                checked += 1
        self.assertGreaterEqual(checked, 10)
        # The inline graph's report: end to end, layerwise / plan.
        m = re.search(r"end to end \(model\): plan ([0-9.]+) ms, layerwise ([0-9.]+) ms, "
                      r"speedup ([0-9.]+)x", self.steps["tune-inline"])
        self.assertIsNotNone(m)
        plan, layerwise, shown = (float(g) for g in m.groups())
        # The times are printed to 4 decimals: the ratio of any times that round to them.
        half = 0.00005
        self.assertGreaterEqual(shown, (layerwise - half) / (plan + half) - 0.0005, m.group(0))
        self.assertLessEqual(shown, (layerwise + half) / (plan - half) + 0.0005, m.group(0))
        self.assertGreater(shown, 1.0)

    def test_merge_keeps_validations_apart_and_loses_nothing(self):
        self.assertIn("runs +6 (0 already present)", self.steps["merge"])
        merged = subprocess.run([os.path.join(BUILD, "apps", "brickdl-query"), "--db",
                                 os.path.join(self.out, "merged.db"), "export", "--format", "csv"],
                                capture_output=True, text=True, timeout=120)
        with open(os.path.join(self.out, "export.csv"), encoding="utf-8") as f:
            self.assertEqual(merged.stdout.count("\n"), f.read().count("\n"))


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
