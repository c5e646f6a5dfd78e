"""A small synthetic tuning database built from core/store/schema.sql with known rows.

The numbers are chosen so that every value the figure scripts extract can be checked by hand;
the expected values are written out in test_figdata.py next to each assertion.
"""
import json
import os
import sys

RESULTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, RESULTS)
import brickdl_store  # noqa: E402

MODEL_TARGET = "model:A100-40GB"
CPU_TARGET = "cpu:Synthetic CPU"
GPU_TARGET = "gpu:NVIDIA H200/sm90/drv580.00/cuda13.0/cudnn9.10"
SPEC = "A100-40GB"
NOW = "2025-01-01T00:00:00Z"
# The model's reason for Fig 11's infeasible padded 16^3 brick (long: it must not be cut).
FIG11_INFEASIBLE = ("padded regions need 218 KiB of shared memory per block; A100-40GB allows "
                    "163 KiB")


class Builder:
    """Thin insert helpers over the schema (the figure scripts only ever read)."""

    def __init__(self, path):
        # Created from the schema file, meta rows included, as the Python side creates one.
        self.conn = brickdl_store.open_db(path, write=True, create=True)
        self._workloads = 0

    def _insert(self, sql, args):
        return self.conn.execute(sql, args).lastrowid

    def target(self, fingerprint, backend):
        return self._insert("INSERT INTO targets(fingerprint, backend) VALUES (?, ?)",
                            (fingerprint, backend))

    def run(self, experiment, model, target_id, batch=8, status="complete", config=None,
            spec=SPEC, precision="fp32"):
        return self._insert(
            "INSERT INTO runs(experiment, config_json, model, batch, precision, gpu_spec, "
            "target_id, git_revision, started_at, ended_at, status) VALUES "
            "(?, ?, ?, ?, ?, ?, ?, 'test', ?, ?, ?)",
            (experiment, json.dumps(config or {}), model, batch, precision, spec, target_id,
             NOW, NOW, status))

    def workload(self, num_layers=1, description=""):
        self._workloads += 1
        return self._insert("INSERT INTO workloads(signature, num_layers, description) "
                            "VALUES (?, ?, ?)", (f"w{self._workloads}", num_layers,
                                                 description))

    def group(self, run_id, workload_id, first, last, label=""):
        self.conn.execute("INSERT INTO run_groups(run_id, workload_id, first_layer, "
                          "last_layer, layer_names, label) VALUES (?, ?, ?, ?, ?, ?)",
                          (run_id, workload_id, first, last, f"l{first} .. l{last}", label))

    def candidate(self, workload_id, strategy, edge=8, threads=256, dims=3, nb=1):
        bd = edge if dims == 3 else 1
        return self._insert("INSERT INTO candidates(workload_id, strategy, bd, bh, bw, cb, "
                            "bn, threads) VALUES (?, ?, ?, ?, ?, 0, ?, ?)",
                            (workload_id, strategy, bd, edge, edge, nb, threads))

    def prediction(self, candidate_id, time, dram=0.0, compute=0.0, ac=0.0, cf=0.0, l1=0.0,
                   l2=0.0, dram_bytes=0.0, feasible=True, version="v1", spec=SPEC, reason=""):
        self.conn.execute(
            "INSERT INTO predictions(candidate_id, gpu_spec, model_version, feasible, reason, "
            "time_ms, time_dram_ms, time_l2_ms, time_compute_ms, time_atomics_compulsory_ms, "
            "time_atomics_conflict_ms, time_other_ms, flops, redundant_flops, l1_bytes, "
            "l2_bytes, dram_bytes, dram_lower_bound, atomics_compulsory, atomics_conflict) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?, 0, 0, 0, ?, ?, ?, 0, 0, 0)",
            (candidate_id, spec, version, int(feasible), reason, time, dram, compute, ac, cf,
             l1, l2, dram_bytes))

    def baseline_prediction(self, workload_id, time, dram=0.0, compute=0.0, l1=0.0, l2=0.0,
                            dram_bytes=0.0, version="v1", spec=SPEC, baseline="paper-unfused",
                            launches=3):
        """A row of baseline_predictions: the model's time of another layerwise baseline of a
        workload (the paper's unfused cuDNN)."""
        self.conn.execute(
            "INSERT INTO baseline_predictions(workload_id, gpu_spec, model_version, baseline, "
            "time_ms, time_dram_ms, time_l2_ms, time_compute_ms, time_atomics_compulsory_ms, "
            "time_atomics_conflict_ms, time_other_ms, flops, redundant_flops, l1_bytes, "
            "l2_bytes, dram_bytes, dram_lower_bound, atomics_compulsory, atomics_conflict, "
            "launches) VALUES (?, ?, ?, ?, ?, ?, 0, ?, 0, 0, 0, 0, 0, ?, ?, ?, 0, 0, 0, ?)",
            (workload_id, spec, version, baseline, time, dram, compute, l1, l2, dram_bytes,
             launches))

    def measurement(self, candidate_id, target_id, run_id, median, status="ok", counters=None):
        mid = self._insert(
            "INSERT INTO measurements(candidate_id, target_id, run_id, status, median_ms, "
            "min_ms, max_ms, p25_ms, p75_ms, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (candidate_id, target_id, run_id, status, median, median, median, median, median,
             NOW))
        for name, value in (counters or {}).items():
            self.conn.execute("INSERT INTO counters(measurement_id, name, value) VALUES "
                              "(?, ?, ?)", (mid, name, value))
        return mid

    def plan(self, run_id, kind, predicted, layerwise_predicted, groups, measured=None,
             layerwise_measured=None):
        pid = self._insert(
            "INSERT INTO plans(run_id, kind, json, predicted_ms, measured_ms, "
            "layerwise_predicted_ms, layerwise_measured_ms, created_at) VALUES "
            "(?, ?, '{}', ?, ?, ?, ?, ?)",
            (run_id, kind, predicted, measured, layerwise_predicted, layerwise_measured, NOW))
        for idx, (cid, first, last) in enumerate(groups):
            self.conn.execute("INSERT INTO plan_groups(plan_id, idx, candidate_id, "
                              "first_layer, last_layer) VALUES (?, ?, ?, ?, ?)",
                              (pid, idx, cid, first, last))
        return pid

    def baseline(self, target_id, model, framework, median, batch=8):
        return self._insert(
            "INSERT INTO baselines(target_id, model, batch, precision, framework, median_ms, "
            "p25_ms, p75_ms, created_at) VALUES (?, ?, ?, 'fp32', ?, ?, ?, ?, ?)",
            (target_id, model, batch, framework, median, median, median, NOW))

    def close(self):
        self.conn.commit()
        self.conn.close()


def _fig7(b, t_model, t_gpu):
    # resnet50, model only: groups (1-2) padded and (3) layerwise.
    run = b.run("resnet50", "resnet50", t_model)
    w12, w3 = b.workload(2), b.workload(1)
    l12 = b.candidate(w12, "layerwise")
    b.prediction(l12, time=4, dram=3, compute=1)
    p12 = b.candidate(w12, "padded")
    b.prediction(p12, time=3, dram=1.5, compute=1)
    l3 = b.candidate(w3, "layerwise")
    b.prediction(l3, time=2, dram=1, compute=0.5)
    b.group(run, w12, 1, 2)
    b.group(run, w3, 3, 3)
    b.plan(run, "predicted", 5, 6, [(p12, 1, 2), (l3, 3, 3)])
    # The paper's unfused baseline of both workloads: 8 + 4 ms (DRAM 6 + 3, compute 1 + 0.5);
    # an older model version and another spec's row are never read.
    b.baseline_prediction(w12, 100, version="v0")
    b.baseline_prediction(w12, 8, dram=6, compute=1)
    b.baseline_prediction(w3, 4, dram=3, compute=0.5)
    b.baseline_prediction(w3, 50, spec="H200")
    # A later aborted run without plans: the complete run above must still be chosen.
    b.run("resnet50", "resnet50", t_model, status="aborted")

    # vgg16_bn measured on the GPU: a predicted plan, then a measured one.
    run = b.run("vgg16_bn", "vgg16_bn", t_gpu)
    w12, w3 = b.workload(2), b.workload(1)
    l12 = b.candidate(w12, "layerwise")
    b.prediction(l12, time=4, dram=3, compute=1)
    p12 = b.candidate(w12, "padded")
    b.prediction(p12, time=3, dram=1.5, compute=1)
    l3 = b.candidate(w3, "layerwise")
    b.prediction(l3, time=2, dram=1, compute=0.5)
    b.group(run, w12, 1, 2)
    b.group(run, w3, 3, 3)
    b.plan(run, "predicted", 5, 6, [(p12, 1, 2), (l3, 3, 3)])
    b.plan(run, "measured", 5, 6, [(p12, 1, 2), (l3, 3, 3)], measured=4, layerwise_measured=8)
    # U predicted only (6 + 3 ms): the comparison against U is predicted, though the plan is
    # measured (no variant.paper_unfused_ms counter: the layerwise candidates' measurements
    # are not in the database).
    b.baseline_prediction(w12, 6, dram=4, compute=1)
    b.baseline_prediction(w3, 3, dram=2, compute=0.5)
    # Baselines: one comparable (same GPU name), one of another GPU, one of another batch.
    t_h200 = b.target("gpu:NVIDIA H200", "cuda")
    t_a100 = b.target("gpu:NVIDIA A100-SXM4-40GB", "cuda")
    b.baseline(t_h200, "vgg16_bn", "torch-compile", 6)
    b.baseline(t_a100, "vgg16_bn", "jax-xla", 1)
    b.baseline(t_h200, "vgg16_bn", "pytorch-eager", 2, batch=1)


def _fig8(b, t_cpu):
    # An earlier, aborted run measured two candidates; the resumed run below reuses them.
    old_run = b.run("fig8_resnet50_subgraphs", "resnet50", t_cpu, status="aborted")
    run = b.run("fig8_resnet50_subgraphs", "resnet50", t_cpu)
    # "subgraph 2": everything measured on the CPU.
    w = b.workload(3, "conv1x1 | conv3x3 | conv1x1")
    b.group(run, w, 1, 3, "subgraph 2")
    lw = b.candidate(w, "layerwise")
    b.prediction(lw, time=10, dram=6, compute=2, l1=100, l2=80, dram_bytes=60)
    p8 = b.candidate(w, "padded", 8)
    b.prediction(p8, time=8, dram=4, compute=3, l1=130, l2=90, dram_bytes=45)
    p16 = b.candidate(w, "padded", 16)
    b.prediction(p16, time=7.5, feasible=False)
    m8 = b.candidate(w, "memoized", 8)
    b.prediction(m8, time=9, dram=4, compute=2, ac=0.5, cf=0.5, l1=120, l2=88, dram_bytes=48)
    b.baseline_prediction(w, 16, dram=12, compute=2, l1=200, l2=160, dram_bytes=150)
    b.measurement(lw, t_cpu, run, 20, counters={"bytes_loaded": 70, "bytes_stored": 30})
    b.measurement(p8, t_cpu, old_run, 19)  # superseded by this run's measurement
    b.measurement(p8, t_cpu, run, 18)
    b.measurement(p16, t_cpu, run, 1)  # infeasible under the model: never chosen
    b.measurement(m8, t_cpu, old_run, 15)  # measured before the resume only: reused
    # "subgraph 10": memoized not measured (only a wrong result): all predicted. Its group
    # has no layerwise candidate of its own: layerwise is layers 4, 5 and 6 one by one.
    w = b.workload(3)
    b.group(run, w, 4, 6, "subgraph 10")
    # The paper's baseline has rows for layers 4 and 5 only: U is absent for this subgraph.
    for layer, (ms, measured) in zip((4, 5, 6), ((1, 10), (1, 10), (2, 20))):
        wl = b.workload(1)
        b.group(run, wl, layer, layer)
        c = b.candidate(wl, "layerwise")
        b.prediction(c, time=ms, dram=ms / 2, compute=ms / 4, l1=ms * 2.5, l2=ms * 2.5,
                     dram_bytes=ms * 2.5)
        b.measurement(c, t_cpu, run, measured)
        if layer < 6:
            b.baseline_prediction(wl, 3 * ms)
    # Padded issues 5x layerwise's L1 bytes: above Fig 9's axis, its value written on the bar.
    p = b.candidate(w, "padded", 8)
    b.prediction(p, time=3, dram=1, compute=1, l1=50, l2=11, dram_bytes=9)
    m = b.candidate(w, "memoized", 8)
    b.prediction(m, time=5, dram=2, compute=2, l1=11, l2=10.5, dram_bytes=8)
    b.measurement(p, t_cpu, run, 30)
    b.measurement(m, t_cpu, run, None, status="wrong_result")
    # An unlabelled group is not a subgraph.
    w = b.workload(2)
    b.group(run, w, 7, 8)


def _fig10(b, t_cpu):
    run = b.run("micro_graphsize", "micro_graphsize", t_cpu, batch=1)
    labels = {(1, 2): "2+2+2 #1", (3, 4): "2+2+2 #2", (5, 6): "2+2+2 #3, 4+2 #2",
              (1, 4): "4+2 #1", (1, 6): "6 #1"}
    # Layerwise: one single-layer group per layer, 2 ms each (DRAM 1, compute 0.5).
    # U: 5 ms per layer (DRAM 4, compute 0.5), all predicted as the rest of this run.
    for layer in range(1, 7):
        w = b.workload(1, "conv3x3x3 3->3 48x48x48 +relu")
        b.group(run, w, layer, layer)
        b.prediction(b.candidate(w, "layerwise"), time=2, dram=1, compute=0.5)
        b.baseline_prediction(w, 5, dram=4, compute=0.5)
    for (first, last), label in labels.items():
        n = last - first + 1
        w = b.workload(n)
        b.group(run, w, first, last, label)
        if n == 6:
            b.prediction(b.candidate(w, "padded", 8), time=13, dram=7, compute=3)
            b.prediction(b.candidate(w, "memoized", 8), time=14, dram=6, compute=3, ac=1,
                         cf=1)
        else:
            b.prediction(b.candidate(w, "padded", 8), time=1.5 * n, dram=n, compute=0.5 * n)
            b.prediction(b.candidate(w, "memoized", 8), time=1.25 * n, dram=0.5 * n,
                         compute=0.5 * n, ac=0.125 * n)
    # A run without labels: partitions from its stored configuration.
    run = b.run("micro_graphsize_cfg", "micro_graphsize", t_cpu, batch=1,
                config={"search": {"partitions": [[2, 2, 2], [6]]}})
    w = b.workload(1)
    b.group(run, w, 1, 1)


def _fig11(b, t_gpu):
    run = b.run("micro_bricksize", "micro_bricksize", t_gpu, batch=1)
    w1 = b.workload(1)
    b.group(run, w1, 1, 1)
    w = b.workload(3)
    b.group(run, w, 1, 3)
    gpu_counters = {"l1tex__t_bytes.sum": 1000, "lts__t_bytes.sum": 800,
                    "dram__bytes_read.sum": 300, "dram__bytes_write.sum": 100}
    lw = b.candidate(w, "layerwise")
    b.prediction(lw, time=5, dram=2.5, compute=1, dram_bytes=500)
    # The paper's baseline measured on the GPU next to layerwise: 25 ms (its predicted
    # fractions: DRAM 10 / 12.5, compute 1 / 12.5).
    b.measurement(lw, t_gpu, run, 10, counters={**gpu_counters,
                                                 "variant.paper_unfused_ms": 25,
                                                 "variant.paper_unfused_warm_ms": 20})
    b.baseline_prediction(w, 12.5, dram=10, compute=1)
    measured = {("padded", 4, 256): 12, ("padded", 8, 256): 9, ("padded", 8, 128): 8.5,
                ("padded", 16, 256): 8, ("memoized", 4, 256): 13, ("memoized", 8, 256): 8.2,
                ("memoized", 16, 256): 7.5}
    for (strategy, edge, threads), ms in measured.items():
        c = b.candidate(w, strategy, edge, threads)
        b.prediction(c, time=ms / 2, dram=ms / 4, compute=ms / 8)
        b.measurement(c, t_gpu, run, ms)


def _fig11_model(b, t_model):
    """Fig 11's chain model-only at the paper's size (224^3): a panel of its own."""
    run = b.run("micro_bricksize", "micro_bricksize", t_model, batch=1)
    w = b.workload(3, "conv3x3x3 3->3 224x224x224 +relu | conv3x3x3 3->3 224x224x224 +relu | "
                      "conv3x3x3 3->3 224x224x224 +relu")
    b.group(run, w, 1, 3)
    b.prediction(b.candidate(w, "layerwise"), time=40, dram=30, compute=5)
    b.baseline_prediction(w, 100, dram=80, compute=5)
    b.prediction(b.candidate(w, "padded", 8), time=60, dram=20, compute=30)
    b.prediction(b.candidate(w, "memoized", 8), time=30, dram=15, compute=10, ac=2, cf=3)
    b.prediction(b.candidate(w, "padded", 16), time=20, feasible=False,
                 reason=FIG11_INFEASIBLE)
    b.prediction(b.candidate(w, "memoized", 16), time=35, dram=15, compute=15, ac=1, cf=1)


def build(path):
    """Writes the synthetic database to `path`."""
    b = Builder(path)
    t_model = b.target(MODEL_TARGET, "none")
    t_cpu = b.target(CPU_TARGET, "cpu")
    t_gpu = b.target(GPU_TARGET, "cuda")
    _fig7(b, t_model, t_gpu)
    _fig8(b, t_cpu)
    _fig10(b, t_cpu)
    _fig11(b, t_gpu)
    _fig11_model(b, t_model)
    b.close()


def build_empty(path):
    """A database with the schema and meta rows only."""
    Builder(path).close()
