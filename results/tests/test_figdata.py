"""Data extraction of the figure scripts, checked on the synthetic database by hand."""
import math
import os
import shutil
import sqlite3
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import figdata as fd  # noqa: E402
import synthetic_db  # noqa: E402


class SyntheticDb:
    """A fresh synthetic database (synthetic_db.py) for the test class, opened read-only."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.path = os.path.join(cls.tmp.name, "synthetic.db")
        synthetic_db.build(cls.path)
        cls.conn = fd.open_db(cls.path)

    @classmethod
    def tearDownClass(cls):
        cls.conn.close()
        cls.tmp.cleanup()


class FigDataTest(SyntheticDb, unittest.TestCase):

    def assertBar(self, bar, total, dram, compute, ac=0.0, cf=0.0, places=9):
        self.assertAlmostEqual(bar.total, total, places=places)
        self.assertAlmostEqual(bar.dram, dram, places=places)
        self.assertAlmostEqual(bar.compute, compute, places=places)
        self.assertAlmostEqual(bar.atomics_compulsory, ac, places=places)
        self.assertAlmostEqual(bar.atomics_conflict, cf, places=places)
        # The two sides of the paper's bar pair both add up to the total.
        self.assertAlmostEqual(sum(bar.memory_side.values()), total, places=places)
        self.assertAlmostEqual(sum(bar.compute_side.values()), total, places=places)

    # ---- runs ----

    def test_latest_complete_run_wins_over_a_later_aborted_one(self):
        run = fd.find_run(self.conn, "resnet50")
        self.assertEqual(run.status, "complete")
        self.assertEqual(run.target, synthetic_db.MODEL_TARGET)
        self.assertIsNone(fd.find_run(self.conn, "resnet50", target_prefix="gpu:"))
        self.assertIsNone(fd.find_run(self.conn, "no_such_experiment"))

    # ---- Fig 7 ----

    def test_fig7_model_only_run_is_predicted_and_normalized_to_layerwise(self):
        data = fd.fig7_data(self.conn, ["resnet50", "vgg16_bn", "deepcam"])
        self.assertEqual(list(data), ["resnet50", "vgg16_bn", "deepcam"])
        self.assertIsNone(data["deepcam"])
        m = data["resnet50"]
        self.assertEqual(m.source, fd.SOURCE_MODEL)
        self.assertEqual((m.layerwise_ms, m.plan_ms), (6, 5))
        # Layerwise split: layerwise candidates of the plan's groups, 4 + 2 ms with DRAM
        # 3 + 1 and compute 1 + 0.5, over a layerwise total of 6 ms.
        self.assertBar(m.layerwise, 1.0, 4 / 6, 1.5 / 6)
        # Plan: padded (3 ms, DRAM 1.5, compute 1) + layerwise (2, 1, 0.5) = 5 ms of 6.
        self.assertBar(m.plan, 5 / 6, 2.5 / 6, 1.5 / 6)
        self.assertEqual(m.baselines, {})

    def test_fig7_measured_plan_scales_predicted_fractions_and_adds_same_gpu_baselines(self):
        m = fd.fig7_data(self.conn, ["vgg16_bn"])["vgg16_bn"]
        self.assertEqual(m.source, fd.SOURCE_GPU)
        self.assertEqual((m.layerwise_ms, m.plan_ms), (8, 4))
        self.assertBar(m.layerwise, 1.0, 4 / 6, 1.5 / 6)
        # Measured 4 ms of a measured layerwise 8 ms; fractions DRAM 2.5/5, compute 1.5/5.
        self.assertBar(m.plan, 0.5, 0.25, 0.15)
        # Only the H200 baseline of the same batch: 6 ms / 8 ms.
        self.assertEqual(list(m.baselines), ["torch-compile"])
        self.assertAlmostEqual(m.baselines["torch-compile"]["normalized"], 0.75)

    def test_gpu_name_of_fingerprints(self):
        self.assertEqual(fd.gpu_name(synthetic_db.GPU_TARGET), "NVIDIA H200")
        self.assertEqual(fd.gpu_name("gpu:NVIDIA H200"), "NVIDIA H200")
        self.assertIsNone(fd.gpu_name("cpu:x"))

    # ---- Figs 8-9 ----

    def test_subgraphs_in_natural_label_order(self):
        run = fd.find_run(self.conn, fd.FIG8_EXPERIMENT)
        sgs = fd.subgraph_data(self.conn, run)
        self.assertEqual([s.label for s in sgs], ["subgraph 2", "subgraph 10"])

    def test_fig8_all_measured_subgraph_uses_cpu_medians(self):
        run = fd.find_run(self.conn, fd.FIG8_EXPERIMENT)
        sg = fd.subgraph_data(self.conn, run)[0]
        self.assertEqual(sg.source, fd.SOURCE_CPU)
        # The infeasible padded 16 (measured 1 ms) never wins; padded 8's latest is 18 ms.
        self.assertEqual(sg.chosen["padded"].brick, "8x8x8")
        self.assertEqual(sg.chosen["padded"].measured_ms, 18)
        self.assertBar(sg.bars["layerwise"], 20, 12, 4)
        self.assertBar(sg.normalized["layerwise"], 1.0, 0.6, 0.2)
        # Padded: 18 ms, predicted fractions DRAM 4/8 and compute 3/8; / 20 ms.
        self.assertBar(sg.normalized["padded"], 0.9, 0.45, 0.3375)
        # Memoized: 15 ms, DRAM 4/9, compute 2/9, each atomics share 0.5/9; / 20 ms.
        self.assertBar(sg.normalized["memoized"], 0.75, 15 * 4 / 9 / 20, 15 * 2 / 9 / 20,
                       15 * 0.5 / 9 / 20, 15 * 0.5 / 9 / 20)

    def test_fig8_partly_measured_subgraph_falls_back_to_predictions(self):
        run = fd.find_run(self.conn, fd.FIG8_EXPERIMENT)
        sg = fd.subgraph_data(self.conn, run)[1]
        self.assertEqual(sg.source, fd.SOURCE_MODEL)
        self.assertAlmostEqual(sg.normalized["padded"].total, 0.75)
        self.assertAlmostEqual(sg.normalized["memoized"].total, 1.25)
        # Layerwise of layers 4-6 one by one: 1 + 1 + 2 ms, DRAM half, compute a quarter.
        self.assertEqual([c.prediction["time_ms"] for c in sg.chosen["layerwise"]], [1, 1, 2])
        self.assertBar(sg.normalized["layerwise"], 1.0, 0.5, 0.25)
        # Bytes 2.5 per predicted ms: 10 over the three layers.
        self.assertEqual(sg.transactions["layerwise"], (10, 10, 10))
        for got, want in zip(sg.ratios["memoized"], (1.1, 1.05, 0.8)):
            self.assertAlmostEqual(got, want)

    def test_fig9_ratios_from_predictions_on_a_cpu_run(self):
        run = fd.find_run(self.conn, fd.FIG8_EXPERIMENT)
        sg = fd.subgraph_data(self.conn, run)[0]
        self.assertEqual(sg.bytes_source, fd.SOURCE_MODEL)
        for got, want in zip(sg.ratios["padded"], (1.3, 1.125, 0.75)):
            self.assertAlmostEqual(got, want)
        for got, want in zip(sg.ratios["memoized"], (1.2, 1.1, 0.8)):
            self.assertAlmostEqual(got, want)

    # ---- Fig 10 ----

    def test_partition_labels(self):
        self.assertEqual(fd.parse_partition_labels("2+2+2 #3, 4+2 #2"),
                         [("2+2+2", 3), ("4+2", 2)])
        self.assertEqual(fd.parse_partition_labels("3 + 3 #1"), [("3+3", 1)])
        self.assertEqual(fd.parse_partition_labels("subgraph 1"), [])

    def test_fig10_partitions_from_labels(self):
        data = fd.fig10_data(self.conn)
        self.assertEqual(data.source, fd.SOURCE_MODEL)
        self.assertEqual([p.name for p in data.partitions], ["2+2+2", "4+2", "6"])
        self.assertEqual(data.partitions[0].groups, [(1, 2), (3, 4), (5, 6)])
        self.assertEqual(data.partitions[1].groups, [(1, 4), (5, 6)])
        # Layerwise: three 2-layer groups at 2 ms per layer, DRAM 1 and compute 0.5 per layer.
        self.assertBar(data.layerwise, 12, 6, 3)
        p222, p42, p6 = data.partitions
        self.assertBar(p222.bars["padded"], 9, 6, 3)
        self.assertBar(p222.bars["memoized"], 7.5, 3, 3, 0.75)
        self.assertBar(p42.bars["padded"], 9, 6, 3)
        self.assertBar(p6.bars["padded"], 13, 7, 3)
        self.assertBar(p6.bars["memoized"], 14, 6, 3, 1, 1)

    def test_fig10_partitions_from_config_when_unlabelled(self):
        run = fd.find_run(self.conn, "micro_graphsize_cfg")
        self.assertEqual(fd.partitions_of_run(self.conn, run),
                         [("2+2+2", [(1, 2), (3, 4), (5, 6)]), ("6", [(1, 6)])])

    # ---- Fig 11 ----

    def test_fig11_best_measured_candidate_per_brick_edge(self):
        data = fd.fig11_data(self.conn)
        self.assertEqual(data.source, fd.SOURCE_GPU)
        self.assertEqual(data.group[:2], (1, 3))
        self.assertEqual(sorted(data.bricks), [4, 8, 16])
        totals = {e: {s: b.total for s, b in d.items()} for e, d in data.bricks.items()}
        self.assertEqual(totals, {4: {"padded": 12, "memoized": 13},
                                  8: {"padded": 8.5, "memoized": 8.2},
                                  16: {"padded": 8, "memoized": 7.5}})
        self.assertEqual(data.chosen[8]["padded"].threads, 128)
        # Predicted fractions: DRAM half, compute a quarter of the predicted time.
        self.assertBar(data.bricks[16]["memoized"], 7.5, 3.75, 1.875)
        self.assertBar(data.layerwise, 10, 5, 2)

    # ---- Fig 12 ----

    def test_fig12_points_latest_ok_feasible_per_candidate_and_target(self):
        points = fd.fig12_data(self.conn)
        cpu = [p for p in points if p.target == synthetic_db.CPU_TARGET]
        gpu = [p for p in points if p.target == synthetic_db.GPU_TARGET]
        self.assertEqual(len(points), 15)
        self.assertEqual(sorted((p.predicted_ms, p.measured_ms) for p in cpu),
                         [(1, 10), (1, 10), (2, 20), (3, 30), (8, 18), (9, 15), (10, 20)])
        self.assertEqual(len(gpu), 8)
        lw = [p for p in gpu if p.strategy == "layerwise"][0]
        self.assertEqual((lw.bytes_kind, lw.predicted_bytes, lw.measured_bytes),
                         ("DRAM", 500, 400))
        cpu_lw = [p for p in cpu if p.measured_ms == 20][0]
        self.assertEqual((cpu_lw.bytes_kind, cpu_lw.predicted_bytes, cpu_lw.measured_bytes),
                         ("L1/L2 issued", 100, 100))

    def test_fig12_statistics(self):
        points = fd.fig12_data(self.conn, target_prefix="cpu:")
        s = fd.accuracy_stats([p.predicted_ms for p in points], [p.measured_ms for p in points])
        # Pairs (10,20) (8,18) (9,15) (1,10) (1,10) (2,20) (3,30): errors 0.5, 10/18, 0.4 and
        # four times 0.9. Tie-averaged ranks (7,5.5) (5,4) (6,3) (1.5,1.5) (1.5,1.5) (3,5.5)
        # (4,7), both means 4: sxy = 13.5, sxx = 27.5, syy = 27.
        self.assertEqual(s["n"], 7)
        self.assertAlmostEqual(s["median_rel_error"], 0.9)
        self.assertAlmostEqual(s["worst_rel_error"], 0.9)
        self.assertAlmostEqual(s["spearman"], 13.5 / math.sqrt(27.5 * 27))
        gpu = fd.fig12_data(self.conn, target_prefix="gpu:")
        s = fd.accuracy_stats([p.predicted_ms for p in gpu], [p.measured_ms for p in gpu])
        self.assertEqual((s["n"], s["median_rel_error"], s["worst_rel_error"], s["spearman"]),
                         (8, 0.5, 0.5, 1.0))

    def test_ranks_and_spearman(self):
        self.assertEqual(fd.ranks([1, 2, 2, 3]), [1, 2.5, 2.5, 4])
        self.assertAlmostEqual(fd.spearman([1, 2, 3, 4], [10, 30, 20, 40]), 0.8)
        self.assertIsNone(fd.spearman([1, 2, 4], [2, 2, 2]))
        self.assertIsNone(fd.spearman([1], [1]))


def schema4_copy(src, dst):
    """`src` as a schema-4 file: no baseline_predictions table, meta says 4."""
    shutil.copyfile(src, dst)
    conn = sqlite3.connect(dst)
    conn.execute("DROP TABLE baseline_predictions")
    conn.execute("UPDATE meta SET value = '4' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()


class PaperBaselineTest(SyntheticDb, unittest.TestCase):
    """U, the paper's unfused cuDNN baseline: predicted (baseline_predictions), measured
    (variant.paper_unfused_ms), absent (older schema, missing rows), by hand."""

    assertBar = FigDataTest.assertBar

    def test_fig7_against_unfused_predicted(self):
        m = fd.fig7_data(self.conn, ["resnet50"])["resnet50"]
        v = m.against_unfused
        self.assertIsNone(m.unfused_missing)
        self.assertEqual(v.source, fd.SOURCE_MODEL)
        self.assertIsNone(v.note)
        # U = 8 + 4 ms of the latest rows for A100-40GB (not v0's 100, not H200's 50);
        # DRAM 6 + 3, compute 1 + 0.5. L = the plan's layerwise 6 ms, the plan 5 ms.
        self.assertEqual(v.unfused_ms, 12)
        self.assertBar(v.normalized["unfused"], 1.0, 9 / 12, 1.5 / 12)
        self.assertBar(v.normalized["layerwise"], 0.5, 4 / 12, 1.5 / 12)
        self.assertBar(v.normalized["plan"], 5 / 12, 2.5 / 12, 1.5 / 12)

    def test_fig7_against_unfused_is_predicted_when_u_is_not_measured(self):
        m = fd.fig7_data(self.conn, ["vgg16_bn"])["vgg16_bn"]
        self.assertEqual(m.source, fd.SOURCE_GPU)  # the comparison against L: measured
        v = m.against_unfused
        self.assertEqual(v.source, fd.SOURCE_MODEL)
        self.assertIn("no variant.paper_unfused_ms counter", v.note)
        # U 6 + 3 ms, L 6, plan 5: all predicted; the measured frameworks stay out.
        self.assertEqual(v.unfused_ms, 9)
        self.assertAlmostEqual(v.normalized["layerwise"].total, 6 / 9)
        self.assertAlmostEqual(v.normalized["plan"].total, 5 / 9)
        self.assertEqual(v.baselines, {})

    def test_fig7_against_unfused_measured_on_a_gpu(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "gpu.db")
            b = synthetic_db.Builder(path)
            t = b.target(synthetic_db.GPU_TARGET, "cuda")
            run = b.run("resnet50", "resnet50", t)
            w12, w3 = b.workload(2), b.workload(1)
            l12, p12, l3 = (b.candidate(w12, "layerwise"), b.candidate(w12, "padded"),
                            b.candidate(w3, "layerwise"))
            b.prediction(l12, time=4, dram=3, compute=1)
            b.prediction(p12, time=3, dram=1.5, compute=1)
            b.prediction(l3, time=2, dram=1, compute=0.5)
            b.measurement(l12, t, run, 5, counters={"variant.paper_unfused_ms": 9})
            b.measurement(l3, t, run, 3, counters={"variant.paper_unfused_ms": 4})
            b.baseline_prediction(w12, 10, dram=8, compute=1)
            b.baseline_prediction(w3, 5, dram=4, compute=0.5)
            b.group(run, w12, 1, 2)
            b.group(run, w3, 3, 3)
            b.plan(run, "measured", 5, 6, [(p12, 1, 2), (l3, 3, 3)], measured=6,
                   layerwise_measured=8)
            b.baseline(t, "resnet50", "torch-compile", 6.5)
            b.close()
            conn = fd.open_db(path)
            m = fd.fig7_data(conn, ["resnet50"])["resnet50"]
            conn.close()
        v = m.against_unfused
        self.assertEqual(v.source, fd.SOURCE_GPU)
        self.assertIsNone(v.note)
        # U measured 9 + 4 = 13 ms; its split: predicted DRAM 12 of 15, compute 1.5 of 15.
        self.assertEqual(v.unfused_ms, 13)
        self.assertBar(v.normalized["unfused"], 1.0, 0.8, 0.1)
        self.assertAlmostEqual(v.normalized["layerwise"].total, 8 / 13)
        self.assertAlmostEqual(v.normalized["plan"].total, 6 / 13)
        # Frameworks of the same GPU against U too: 6.5 / 13; against L 6.5 / 8.
        self.assertAlmostEqual(v.baselines["torch-compile"]["normalized"], 0.5)
        self.assertAlmostEqual(m.baselines["torch-compile"]["normalized"], 6.5 / 8)

    def test_fig8_against_unfused_and_fig9_ratios(self):
        run = fd.find_run(self.conn, fd.FIG8_EXPERIMENT)
        sg2, sg10 = fd.subgraph_data(self.conn, run)
        v = sg2.against_unfused
        # The comparison against L is measured on the CPU; U cannot be: all predicted.
        self.assertEqual(sg2.source, fd.SOURCE_CPU)
        self.assertEqual(v.source, fd.SOURCE_MODEL)
        self.assertIn("a CPU run", v.note)
        self.assertEqual(v.unfused_ms, 16)
        self.assertBar(v.normalized["unfused"], 1.0, 0.75, 0.125)
        self.assertAlmostEqual(v.normalized["layerwise"].total, 10 / 16)
        # The best predicted padded is 8^3 (8 ms; 16^3 is infeasible), memoized 9 ms.
        self.assertEqual(v.chosen["padded"].brick, "8x8x8")
        self.assertBar(v.normalized["padded"], 0.5, 4 / 16, 3 / 16)
        self.assertAlmostEqual(v.normalized["memoized"].total, 9 / 16)
        # Fig 9 against U: predicted bytes (130, 90, 45) and (120, 88, 48) over (200, 160, 150).
        self.assertEqual(sg2.unfused_transactions, (200, 160, 150))
        for s, want in (("padded", (0.65, 0.5625, 0.3)), ("memoized", (0.6, 0.55, 0.32))):
            for got, w in zip(sg2.unfused_ratios[s], want):
                self.assertAlmostEqual(got, w)
        # Subgraph 10 runs layers 4-6 one by one, and layer 6 has no row: no U.
        self.assertIsNone(sg10.against_unfused)
        self.assertEqual(sg10.unfused_ratios, {})
        self.assertIn("no 'paper-unfused' row in baseline_predictions for model spec "
                      "A100-40GB", sg10.unfused_missing)

    def test_fig10_unfused_of_a_predicted_panel(self):
        data = fd.fig10_data(self.conn)
        self.assertEqual(data.source, fd.SOURCE_MODEL)
        self.assertEqual(data.shape, (48, 48, 48))
        # 6 layers at 5 ms, DRAM 4, compute 0.5.
        self.assertBar(data.unfused, 30, 24, 3)
        self.assertEqual(data.unfused.source, fd.SOURCE_MODEL)
        self.assertIsNone(data.unfused_missing)

    def test_fig11_measured_unfused_and_the_model_panel(self):
        runs = fd.micro_runs(fd.fig11_runs(self.conn), "fig11")
        self.assertEqual([r.backend for r in runs], ["cuda", "none"])
        gpu, model = (fd.fig11_data(self.conn, r) for r in runs)
        # Measured 25 ms on the GPU, split by the prediction's 10 / 12.5 DRAM, 1 / 12.5 compute.
        self.assertBar(gpu.unfused, 25, 20, 2)
        self.assertEqual(gpu.unfused.source, fd.SOURCE_GPU)
        self.assertEqual(model.source, fd.SOURCE_MODEL)
        self.assertEqual(model.shape, (224, 224, 224))
        self.assertBar(model.layerwise, 40, 30, 5)
        self.assertBar(model.unfused, 100, 80, 5)
        self.assertEqual({e: {s: b.total for s, b in d.items()} for e, d in model.bricks.items()},
                         {8: {"padded": 60, "memoized": 30}, 16: {"memoized": 35}})
        self.assertEqual(model.missing[16],
                         {"padded": "infeasible: " + synthetic_db.FIG11_INFEASIBLE})

    def test_versus_rows_by_hand(self):
        run = fd.find_run(self.conn, fd.FIG8_EXPERIMENT)
        rows = {r.bar: r for r in fd.versus_fig8(fd.subgraph_data(self.conn, run))}
        # Only subgraph 2 has a paper counterpart (the paper has 7).
        self.assertEqual(sorted(rows), sorted(
            ["subgraph 2 · cuDNN, read as L (ours fused)",
             "subgraph 2 · cuDNN, read as U (the paper's unfused)",
             "subgraph 2 · padded", "subgraph 2 · memoized"]))
        p = rows["subgraph 2 · padded"]
        self.assertAlmostEqual(p.paper, 0.8)  # the paper's subgraph 2 padded: 0.22 + 0.58
        self.assertEqual((p.vs_l, p.vs_l_source, p.vs_u, p.vs_u_source),
                         (0.9, fd.SOURCE_CPU, 0.5, fd.SOURCE_MODEL))
        self.assertAlmostEqual(p.gap, -0.3)
        as_l = rows["subgraph 2 · cuDNN, read as L (ours fused)"]
        as_u = rows["subgraph 2 · cuDNN, read as U (the paper's unfused)"]
        self.assertEqual((as_l.vs_l, as_l.vs_u), (1.0, 10 / 16))
        self.assertEqual((as_u.vs_l, as_u.vs_u), (1.6, 1.0))
        # Fig 11's model panel at the paper's size: 16^3 memoized 35 of L 40 and U 100; the
        # paper's 785 of 918 ms.
        model = fd.fig11_data(self.conn, fd.micro_runs(fd.fig11_runs(self.conn), "fig11")[1])
        rows = {r.bar: r for r in fd.versus_fig11([model])}
        m16 = rows["16^3 brick · memoized"]
        self.assertEqual((m16.paper_ms, m16.vs_l, m16.vs_u), (785, 0.875, 0.35))
        self.assertAlmostEqual(m16.paper, 785 / 918)
        self.assertIn("(the paper's size)", m16.ours)
        self.assertEqual(rows["16^3 brick · padded"].notes,
                         ["infeasible: " + synthetic_db.FIG11_INFEASIBLE])
        self.assertEqual(rows["32^3 brick · padded"].notes,
                         ["brick edge not in the run's search space"])
        # Fig 10 (predicted): 6 memoized 14 ms of L 12 and U 30; the paper's 1617 of 1440.
        rows = {r.bar: r for r in fd.versus_fig10([fd.fig10_data(self.conn)])}
        m6 = rows["6 · memoized"]
        self.assertAlmostEqual(m6.vs_l, 14 / 12)
        self.assertAlmostEqual(m6.vs_u, 14 / 30)
        self.assertAlmostEqual(m6.paper, 1617 / 1440)
        self.assertEqual(rows["3+3 · padded"].notes, ["partition not in the run"])

    def test_versus_markdown_says_shared_things_once(self):
        rows = [fd.VersusRow("Fig 11", "a", 1.0, "ours X", 918, 1.0, fd.SOURCE_CPU, None, None,
                             "layerwise", ["U absent; really"]),
                fd.VersusRow("Fig 11", "b", 0.855, "ours X", 785, 0.568, fd.SOURCE_CPU, None,
                             None, "memoized", ["U absent; really", "only b"])]
        text = fd.versus_markdown([("Fig 11", rows), ("Fig 8", [])], ["preamble"])
        self.assertIn("Ours: ours X.", text)
        self.assertIn("All rows: U absent; really.", text)
        self.assertIn("| b | 0.855 (785 ms) | 0.568 CPU | n/a | n/a | memoized | only b |", text)
        self.assertIn("| a | 1.000 (918 ms) | 1.000 CPU | n/a | n/a | layerwise |  |", text)
        self.assertIn("(no data: no run of this figure's experiment in the database)", text)


class Schema4Test(unittest.TestCase):
    """A database of schema version 4 has no baseline_predictions: every figure's data is
    there, U is absent, and says why."""

    def test_u_absent_with_the_reason(self):
        with tempfile.TemporaryDirectory() as tmp:
            src, path = os.path.join(tmp, "s5.db"), os.path.join(tmp, "s4.db")
            synthetic_db.build(src)
            schema4_copy(src, path)
            conn = fd.open_db(path)
            try:
                m = fd.fig7_data(conn, ["resnet50"])["resnet50"]
                sgs = fd.subgraph_data(conn, fd.find_run(conn, fd.FIG8_EXPERIMENT))
                d10 = fd.fig10_data(conn)
                rows = fd.versus_fig10([d10])
            finally:
                conn.close()
        why = ("the paper's baseline (U) is absent: this database (schema version 4) has no "
               "baseline_predictions table")
        self.assertAlmostEqual(m.plan.total, 5 / 6)  # the comparison against L as ever
        self.assertIsNone(m.against_unfused)
        self.assertIn(why, m.unfused_missing)
        self.assertTrue(all(sg.against_unfused is None and why in sg.unfused_missing
                            and sg.unfused_ratios == {} for sg in sgs))
        self.assertIsNone(d10.unfused)
        self.assertIn(why, d10.unfused_missing)
        self.assertTrue(rows and all(any(why in n for n in r.notes) for r in rows))
        self.assertTrue(all(r.vs_u is None for r in rows))


class BatchBlockTest(unittest.TestCase):
    """The batch block (candidates.bn, schema version 2) in the brick text, and version-1
    files, which have no bn column and are read as they are."""

    @staticmethod
    def _candidates(path, workload_id):
        conn = fd.open_db(path)
        try:
            run = fd.Run(id=1, experiment="e", model="m", batch=8, precision="fp32",
                         gpu_spec=synthetic_db.SPEC, target_id=1, target="cpu:t",
                         backend="cpu", status="complete", config_json="{}")
            return fd.workload_candidates(conn, workload_id, run)
        finally:
            conn.close()

    def test_batch_block_in_the_brick_text(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "nb.db")
            b = synthetic_db.Builder(path)
            w = b.workload()
            b.candidate(w, "padded", edge=8, dims=2)
            b.candidate(w, "padded", edge=8, dims=2, nb=4)
            b.close()
            cands = self._candidates(path, w)
        self.assertEqual([(c.brick, c.nb) for c in cands], [("8x8", 1), ("8x8/n4", 4)])
        self.assertEqual(cands[1].describe(), "padded 8x8/n4 t256")

    def test_version1_file_reads_with_one_image_per_unit(self):
        v1 = os.path.join(HERE, "..", "..", "tests", "store", "schema_v1.sql")
        if not os.path.isfile(v1):
            self.skipTest("tests/store/schema_v1.sql is not in this tree")
        with open(v1, encoding="utf-8") as f:
            schema = f.read()
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "v1.db")
            conn = sqlite3.connect(path)
            conn.executescript(schema)
            conn.execute("INSERT INTO workloads(signature, num_layers) VALUES ('w', 1)")
            conn.execute("INSERT INTO candidates(workload_id, strategy, bd, bh, bw, cb, "
                         "threads) VALUES (1, 'memoized', 1, 4, 4, 16, 128)")
            conn.commit()
            conn.close()
            cands = self._candidates(path, 1)
        self.assertEqual([(c.brick, c.nb) for c in cands], [("4x4/c16", 1)])


class OpenDbTest(unittest.TestCase):
    def test_missing_file(self):
        with self.assertRaisesRegex(fd.DataError, "no such database file"):
            fd.open_db("/nonexistent/brickdl.db")

    def test_garbage_and_foreign_databases(self):
        with tempfile.TemporaryDirectory() as tmp:
            garbage = os.path.join(tmp, "garbage.db")
            with open(garbage, "wb") as f:
                f.write(b"this is not sqlite" * 100)
            with self.assertRaisesRegex(fd.DataError, "not a brickdl tuning database"):
                fd.open_db(garbage)
            foreign = os.path.join(tmp, "foreign.db")
            conn = sqlite3.connect(foreign)
            conn.execute("CREATE TABLE meta (key TEXT, value TEXT)")
            conn.execute("INSERT INTO meta VALUES ('application', 'other')")
            conn.commit()
            conn.close()
            with self.assertRaisesRegex(fd.DataError, "expected 'brickdl'"):
                fd.open_db(foreign)

    def test_newer_schema(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "new.db")
            synthetic_db.build_empty(path)
            conn = sqlite3.connect(path)
            newer = fd.brickdl_store.schema_version() + 1
            conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(newer),))
            conn.commit()
            conn.close()
            with self.assertRaisesRegex(fd.DataError, f"schema version {newer} is newer"):
                fd.open_db(path)


if __name__ == "__main__":
    unittest.main()
