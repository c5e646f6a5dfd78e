"""results/gpu_summary.py: the device run's summary on a synthetic GPU database whose numbers
are checked by hand below."""
import csv
import io
import os
import sqlite3
import sys
import tempfile
import unittest
from contextlib import redirect_stdout

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import gpu_summary  # noqa: E402
import synthetic_db  # noqa: E402

MB = 1e6


def layerwise_counters(fp32, tf32, own, dram_mb, bf16=False):
    """A layerwise measurement's counters; with bf16, of a bf16 run: its baseline is cuDNN in
    bf16 (a quarter of `fp32`, warm a fifth) and its variant tf32, no strict FP32."""
    base = ({"variant.cudnn_bf16_ms": fp32 / 4, "variant.cudnn_bf16_warm_ms": fp32 / 5} if bf16
            else {"variant.cudnn_fp32_ms": fp32, "variant.cudnn_fp32_warm_ms": fp32 * 0.8})
    kernel = ({"variant.cudnn_bf16_kernel_ms": fp32 / 4 * 0.9} if bf16
              else {"variant.cudnn_fp32_kernel_ms": fp32 * 0.9})
    return base | kernel | {"variant.cudnn_tf32_ms": tf32, "variant.own_layerwise_ms": own,
                   "variant.own_layerwise_max_rel_error": 1e-6,
                   "dram__bytes_read.sum": dram_mb * MB * 2 / 3,
                   "dram__bytes_write.sum": dram_mb * MB / 3}


def build(path, group_layerwise=False, cudnn=True, bf16=False, twin=False):
    """One GPU run of 'gpu_check_resnet50': a 3-layer group labelled 'block 1' (layers 1-3)
    and its three single layers. cuDNN strict FP32 1 + 2 + 3 = 6 ms, TF32 0.5 + 1 + 1.5 = 3 ms,
    our own layerwise 2 + 4 + 6 = 12 ms, DRAM 15 MB a layer (45 MB). Padded 8x8: 4 ms, 30 MB
    (model: 3 ms, 25 MB). Memoized 8x8: wrong result; memoized 16x16: timed out.
    With group_layerwise, the group's own layerwise measurement (5 ms fp32, 2.5 ms tf32,
    36 MB) is there and is the baseline instead of the sum. Without cudnn, the layerwise
    measurements carry no counters (a cpu run): their medians are the baseline. With bf16, the
    layers' baseline is cuDNN bf16, 0.25 + 0.5 + 0.75 = 1.5 ms (warm 1.2 ms). With twin, an
    unlabelled group of the same workload comes first (layers 0 - 2, as ResNet-50's layer1.2
    block shares layer1.1's)."""
    b = synthetic_db.Builder(path)
    t = b.target(synthetic_db.GPU_TARGET, "cuda")
    run = b.run("gpu_check_resnet50", "resnet50", t)
    wg = b.workload(3)
    if twin:
        b.group(run, wg, 0, 2)
    b.group(run, wg, 1, 3, label="block 1")
    for layer, (fp32, tf32, own) in enumerate(((1, .5, 2), (2, 1, 4), (3, 1.5, 6)), start=1):
        w = b.workload(1)
        b.group(run, w, layer, layer)
        c = b.candidate(w, "layerwise", edge=0, threads=0)
        b.prediction(c, time=fp32, dram_bytes=14 * MB)
        b.measurement(c, t, run, fp32,
                      counters=layerwise_counters(fp32, tf32, own, 15, bf16) if cudnn else None)
    if group_layerwise:
        c = b.candidate(wg, "layerwise", edge=0, threads=0)
        b.prediction(c, time=5, dram_bytes=35 * MB)
        b.measurement(c, t, run, 5, counters=layerwise_counters(5, 2.5, 10, 36))
    p = b.candidate(wg, "padded", edge=8, dims=2)
    b.prediction(p, time=3, dram_bytes=25 * MB)
    mid = b.measurement(p, t, run, 4, counters={"dram__bytes_read.sum": 20 * MB,
                                                "dram__bytes_write.sum": 10 * MB,
                                                "kernel_time_ms": 3.5})
    b.conn.execute("UPDATE measurements SET max_rel_error = 2e-6 WHERE id = ?", (mid,))
    m8 = b.candidate(wg, "memoized", edge=8, dims=2)
    b.prediction(m8, time=2, dram_bytes=20 * MB)
    mid = b.measurement(m8, t, run, None, status="wrong_result")
    b.conn.execute("UPDATE measurements SET error = 'max rel error 0.5 at 17' WHERE id = ?",
                   (mid,))
    m16 = b.candidate(wg, "memoized", edge=16, dims=2)
    b.measurement(m16, t, run, None, status="timeout")
    b.baseline(t, "resnet50", "pytorch-eager", 7.5)
    b.close()


def summarize(path, *extra):
    out = io.StringIO()
    with redirect_stdout(out):
        rc = gpu_summary.main([path, *extra])
    return rc, out.getvalue()


class GpuSummaryTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.db = os.path.join(self.tmp.name, "gpu.db")

    def rows(self, **kw):
        build(self.db, **kw)
        return gpu_summary.collect(gpu_summary.Db(self.db))

    def test_baseline_is_the_sum_of_single_layers(self):
        rows = self.rows()
        fp32 = next(r for r in rows if r["kernel"] == "cuDNN fp32 (strict)")
        self.assertAlmostEqual(fp32["time_ms"], 6.0)
        self.assertAlmostEqual(fp32["cudnn_tf32_ms"], 3.0)
        self.assertAlmostEqual(fp32["dram_mb"], 45.0)
        self.assertAlmostEqual(fp32["model_dram_mb"], 42.0)
        self.assertIn("sum of single layers", fp32["error"])
        self.assertIn("warm 4.800", fp32["error"])  # 0.8 + 1.6 + 2.4
        tf32 = next(r for r in rows if r["kernel"] == "cuDNN tf32")
        self.assertAlmostEqual(tf32["vs_cudnn_fp32"], 0.5)
        own = next(r for r in rows if r["kind"] == "own layerwise")
        self.assertAlmostEqual(own["time_ms"], 12.0)
        self.assertAlmostEqual(own["vs_cudnn_fp32"], 2.0)

    def test_kernel_time_beside_wall_time(self):
        rows = self.rows()
        padded = next(r for r in rows if r["kind"] == "padded")
        self.assertAlmostEqual(padded["kernel_ms"], 3.5)
        fp32 = next(r for r in rows if r["kernel"] == "cuDNN fp32 (strict)")
        self.assertAlmostEqual(fp32["kernel_ms"], 5.4)  # 0.9 of 1 + 2 + 3, summed like the times
        tf32 = next(r for r in rows if r["kernel"] == "cuDNN tf32")
        self.assertIsNone(tf32["kernel_ms"])  # no counter: unknown, not zero
        verdict = gpu_summary.verdicts(rows)[0]
        self.assertIn("kernel / wall time 0.88 (cuDNN 0.90)", verdict)  # 3.5 / 4, 5.4 / 6

    def test_merged_candidates_against_cudnn_and_the_model(self):
        rows = self.rows()
        padded = next(r for r in rows if r["kind"] == "padded")
        self.assertEqual(padded["kernel"], "padded 8x8 t256")
        self.assertEqual(padded["status"], "ok")
        self.assertAlmostEqual(padded["vs_cudnn_fp32"], 4 / 6)
        self.assertAlmostEqual(padded["vs_cudnn_tf32"], 4 / 3)
        self.assertAlmostEqual(padded["dram_over_model"], 30 / 25)
        self.assertAlmostEqual(padded["time_over_model"], 4 / 3)
        self.assertAlmostEqual(padded["max_rel_error"], 2e-6)
        memo = [r for r in rows if r["kind"] == "memoized"]
        self.assertEqual(sorted(r["status"] for r in memo), ["timeout", "wrong_result"])
        self.assertTrue(all(r["time_ms"] is None for r in memo))
        self.assertIn("max rel error 0.5", next(r for r in memo if r["status"] ==
                                                "wrong_result")["error"])

    def test_the_groups_own_layerwise_measurement_is_preferred(self):
        rows = self.rows(group_layerwise=True)
        fp32 = next(r for r in rows if r["kernel"] == "cuDNN fp32 (strict)")
        self.assertAlmostEqual(fp32["time_ms"], 5.0)
        self.assertAlmostEqual(fp32["dram_mb"], 36.0)
        self.assertIn("back to back", fp32["error"])
        padded = next(r for r in rows if r["kind"] == "padded")
        self.assertAlmostEqual(padded["vs_cudnn_tf32"], 4 / 2.5)

    def test_without_cudnn_the_layerwise_measurement_is_the_baseline(self):
        rows = self.rows(cudnn=False)
        base = [r for r in rows if r["kind"] == "cudnn"]
        self.assertEqual([r["kernel"] for r in base], ["layerwise (no cuDNN)"])
        self.assertAlmostEqual(base[0]["time_ms"], 6.0)
        self.assertFalse([r for r in rows if r["kind"] == "own layerwise"])
        padded = next(r for r in rows if r["kind"] == "padded")
        self.assertAlmostEqual(padded["vs_cudnn_fp32"], 4 / 6)
        self.assertIsNone(padded["vs_cudnn_tf32"])

    def test_a_sixteen_bit_run_against_its_own_cudnn(self):
        rows = self.rows(bf16=True)
        base = {r["kernel"]: r for r in rows if r["kind"] == "cudnn"}
        self.assertEqual(sorted(base), ["cuDNN bf16", "cuDNN fp32 (strict)", "cuDNN tf32"])
        self.assertAlmostEqual(base["cuDNN bf16"]["time_ms"], 1.5)
        self.assertIn("warm 1.200", base["cuDNN bf16"]["error"])
        self.assertEqual(base["cuDNN fp32 (strict)"]["status"], "missing")
        padded = next(r for r in rows if r["kind"] == "padded")
        self.assertAlmostEqual(padded["cudnn_16bit_ms"], 1.5)
        self.assertAlmostEqual(padded["vs_cudnn_16bit"], 4 / 1.5)
        self.assertAlmostEqual(padded["vs_cudnn_tf32"], 4 / 3)
        self.assertIsNone(padded["vs_cudnn_fp32"])
        rc, text = summarize(self.db)
        self.assertEqual(rc, 0)
        self.assertIn("padded: 1/1 validated and timed; best time / cuDNN fp32 -, / cuDNN tf32 "
                      "1.33, / cuDNN 16-bit 2.67; DRAM", text)
        self.assertIn("1.33x cuDNN tf32, 2.67x cuDNN 16-bit (warm 3.33x)", text)

    def test_printed_summary_and_csv(self):
        build(self.db)
        csv_path = os.path.join(self.tmp.name, "s.csv")
        rc, text = summarize(self.db, "--csv", csv_path)
        self.assertEqual(rc, 0)
        self.assertIn("padded: 1/1 validated and timed; best time / cuDNN fp32 0.67, / cuDNN "
                      "tf32 1.33; DRAM / model median 1.20 (n=1)", text)
        self.assertIn("memoized: 0/2 validated", text)
        self.assertIn("own layerwise: 1/1 validated and timed; best time / cuDNN fp32 2.00", text)
        # Warm: fp32 0.8 + 1.6 + 2.4 = 4.8 ms; no warm tf32 counter.
        self.assertIn("gpu_check_resnet50: block 1: best padded 8x8 t256 4.000 ms = 0.67x cuDNN "
                      "fp32, 1.33x cuDNN tf32 (cold; warm: 0.83x, -x); fewer DRAM bytes than "
                      "cuDNN: yes", text)
        self.assertIn("resnet50 batch 8 fp32 pytorch-eager: 7.500 ms", text)
        self.assertIn("timeout: 1", text)
        self.assertIn("wrong_result: 1 (e.g. max rel error 0.5 at 17)", text)
        with open(csv_path, newline="") as f:
            table = list(csv.DictReader(f))
        self.assertEqual(len(table), 6)  # cuDNN fp32, tf32, own, padded, 2 memoized
        self.assertEqual([r["kind"] for r in table].count("memoized"), 2)

    def test_groups_of_one_workload_are_shown_once_under_the_label(self):
        rows = self.rows(twin=True)
        self.assertEqual({r["group"] for r in rows}, {"block 1"})
        self.assertEqual(len(rows), 6)  # cuDNN fp32, tf32, own, padded, 2 memoized
        rc, text = summarize(self.db)
        self.assertEqual(rc, 0)
        self.assertIn("padded: 1/1 validated and timed", text)
        self.assertIn("memoized: 0/2 validated", text)
        self.assertNotIn("l0 .. l2", text)

    def test_device_attributes_and_stages_are_shown(self):
        build(self.db)
        device = os.path.join(self.tmp.name, "device.json")
        with open(device, "w") as f:
            f.write('{"name": "NVIDIA H200", "cc": 90, "sm_count": 132, "l2_bytes": 62914560, '
                    '"sm_clock_khz": 1980000, "dram_peak_gbs": 4917, "driver_version": 13000, '
                    '"cudnn_version": "9.10.0", "nvrtc_version": "13.0", "spec": "H200", '
                    '"differences": [{"field": "l2_bytes", "device": 62914560, "spec": '
                    '52428800, "unit": "bytes", "used_for": "L2 reuse"}]}')
        stages = os.path.join(self.tmp.name, "stages.txt")
        with open(stages, "w") as f:
            f.write("env ok 3s\ntune_fp32 timeout 120s\n")
        rc, text = summarize(self.db, "--device-json", device, "--stages", stages)
        self.assertEqual(rc, 0)
        self.assertIn("stages: env ok 3s, tune_fp32 timeout 120s", text)
        self.assertIn("L2 60.0 MiB", text)
        self.assertIn("differs from the spec: l2_bytes: device 6.29146e+07, spec 5.24288e+07",
                      text)

    def test_an_empty_database_still_gives_a_summary(self):
        synthetic_db.Builder(self.db).close()
        rc, text = summarize(self.db)
        self.assertEqual(rc, 0)
        self.assertIn("no measured merged groups", text)

    def test_a_file_that_is_no_database_is_exit_2(self):
        with open(self.db, "w") as f:
            f.write("not a database")
        err = io.StringIO()
        from contextlib import redirect_stderr
        with redirect_stderr(err):
            rc, _ = summarize(self.db)
        self.assertEqual(rc, 2)
        self.assertIn(self.db, err.getvalue())


if __name__ == "__main__":
    unittest.main()
