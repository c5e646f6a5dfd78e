"""Data extraction of the figure scripts, checked on the synthetic database by hand."""
import math
import os
import sqlite3
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import figdata as fd  # noqa: E402
import synthetic_db  # noqa: E402


class FigDataTest(unittest.TestCase):
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
