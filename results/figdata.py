"""Reads a brickdl tuning database (core/store/schema.sql) into the numbers of Figs 7-12.

Only the standard library is used here, so the extraction can be tested without matplotlib.

Conventions (see results/README.md):
- A figure reads the latest run of its experiment (runs.experiment), preferring complete runs
  over running/aborted ones; `target_prefix` restricts the runs to targets whose fingerprint
  starts with it (e.g. "gpu:" or "cpu:").
- A candidate's measured time is the median of its latest `ok` measurement on the run's
  target (of this run if there is one, else of any earlier run: resumed tunings reuse them);
  its predicted time is the latest prediction for the run's GPU spec.
- Bars that are compared with each other use one kind of number: measured when every bar of
  the comparison has a measurement, else predicted for all of them.
- The split of a bar into DRAM / compute / atomics always comes from the model's predicted
  components; a measured bar keeps the predicted fractions, scaled to its measured total.
  As in the paper, the memory side is DRAM + idle (the rest of the bar) and the compute side
  is compute + atomics (compulsory, conflict) + other (the rest of the bar).
"""
import json
import math
import os
import re
import sys
from dataclasses import dataclass, field

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import brickdl_store  # noqa: E402

SOURCE_GPU = "measured (GPU)"
SOURCE_CPU = "measured (CPU)"
SOURCE_MODEL = "predicted (model)"
SOURCE_SHORT = {SOURCE_GPU: "GPU", SOURCE_CPU: "CPU", SOURCE_MODEL: "model"}

# GPU counters (CUPTI metric names) used for Fig 9 and Fig 12.
COUNTER_L1 = "l1tex__t_bytes.sum"
COUNTER_L2 = "lts__t_bytes.sum"
COUNTER_DRAM_READ = "dram__bytes_read.sum"
COUNTER_DRAM_WRITE = "dram__bytes_write.sum"
# The CPU executor's counts (equal to the model's l1_bytes by the counting conventions).
COUNTER_CPU_LOADED = "bytes_loaded"
COUNTER_CPU_STORED = "bytes_stored"

FIG7_EXPERIMENTS = ["resnet50", "drn_c_26", "resnet3d_34", "darknet53", "vgg16_bn", "deepcam",
                    "inception_v4"]
FIG8_EXPERIMENT = "fig8_resnet50_subgraphs"
FIG10_EXPERIMENT = "micro_graphsize"
FIG11_EXPERIMENT = "micro_bricksize"

STRATEGIES = ("layerwise", "padded", "memoized")
FUSED = ("padded", "memoized")


# The database cannot be read as a brickdl tuning database (brickdl_store's one error class;
# the message names the file).
DataError = brickdl_store.StoreError


# ---- opening ---------------------------------------------------------------------------

def open_db(path):
    """Opens a tuning database read-only; raises DataError naming the file and the problem."""
    return brickdl_store.open_db(path)


# ---- runs and candidates ---------------------------------------------------------------

@dataclass(frozen=True)
class Run:
    id: int
    experiment: str
    model: str
    batch: int
    precision: str
    gpu_spec: str
    target_id: int
    target: str
    backend: str
    status: str
    config_json: str

    @property
    def measured_source(self):
        """What a measurement of this run is: GPU or CPU (never the model)."""
        return SOURCE_GPU if self.backend == "cuda" else SOURCE_CPU

    def describe(self):
        return (f"target {self.target} · model spec {self.gpu_spec} · batch {self.batch} · "
                f"{self.precision}")


def find_run(conn, experiment, target_prefix=None):
    """The latest run of `experiment` (complete runs first), or None."""
    sql = ("SELECT r.*, t.fingerprint AS target, t.backend AS backend FROM runs r "
           "JOIN targets t ON t.id = r.target_id WHERE r.experiment = ?")
    args = [experiment]
    if target_prefix:
        sql += " AND substr(t.fingerprint, 1, ?) = ?"
        args += [len(target_prefix), target_prefix]
    sql += " ORDER BY (r.status = 'complete') DESC, r.id DESC LIMIT 1"
    row = conn.execute(sql, args).fetchone()
    if row is None:
        return None
    return Run(id=row["id"], experiment=row["experiment"], model=row["model"],
               batch=row["batch"], precision=row["precision"], gpu_spec=row["gpu_spec"],
               target_id=row["target_id"], target=row["target"], backend=row["backend"],
               status=row["status"], config_json=row["config_json"])


@dataclass
class CandidateResult:
    id: int
    workload_id: int
    strategy: str
    bd: int
    bh: int
    bw: int
    cb: int
    threads: int
    nb: int = 1                # batch block: images per unit of work (column bn)
    cl: int = 1                # thread block cluster: CTAs per unit (column cl)
    prediction: dict = None    # the predictions row (column -> value), or None
    measured_ms: float = None  # median of the latest ok measurement on the run's target
    counters: dict = field(default_factory=dict)

    @property
    def brick(self):
        dims = [self.bh, self.bw] if self.bd == 1 else [self.bd, self.bh, self.bw]
        text = "x".join(str(d) for d in dims)
        # As BrickShape::str(): "/c32" when cb > 0, "/n4" when nb > 1, "/x8" when cl > 1.
        text += f"/c{self.cb}" if self.cb else ""
        text += f"/n{self.nb}" if self.nb > 1 else ""
        return text + (f"/x{self.cl}" if self.cl > 1 else "")

    @property
    def feasible(self):
        return self.prediction is not None and bool(self.prediction["feasible"])

    def time(self, measured):
        return self.measured_ms if measured else (
            self.prediction["time_ms"] if self.prediction else None)

    def describe(self):
        if self.strategy == "layerwise":
            return "layerwise"
        return f"{self.strategy} {self.brick} t{self.threads}"


def latest_prediction(conn, candidate_id, gpu_spec):
    row = conn.execute("SELECT * FROM predictions WHERE candidate_id = ? AND gpu_spec = ? "
                       "ORDER BY rowid DESC LIMIT 1", (candidate_id, gpu_spec)).fetchone()
    return dict(row) if row is not None else None


def latest_measurement(conn, candidate_id, target_id, run_id):
    """(median_ms, counters) of the latest ok measurement, this run's first; or (None, {})."""
    row = conn.execute("SELECT id, median_ms FROM measurements WHERE candidate_id = ? AND "
                       "target_id = ? AND status = 'ok' AND median_ms IS NOT NULL "
                       "ORDER BY (run_id = ?) DESC, id DESC LIMIT 1",
                       (candidate_id, target_id, run_id)).fetchone()
    if row is None:
        return None, {}
    counters = dict(conn.execute("SELECT name, value FROM counters WHERE measurement_id = ?",
                                 (row["id"],)).fetchall())
    return row["median_ms"], counters


def workload_candidates(conn, workload_id, run):
    """Every candidate of a workload with its prediction and measurement for `run`."""
    out = []
    for row in conn.execute("SELECT * FROM candidates WHERE workload_id = ? ORDER BY id",
                            (workload_id,)).fetchall():
        measured, counters = latest_measurement(conn, row["id"], run.target_id, run.id)
        out.append(CandidateResult(
            id=row["id"], workload_id=workload_id, strategy=row["strategy"], bd=row["bd"],
            bh=row["bh"], bw=row["bw"], cb=row["cb"], threads=row["threads"],
            # Schema version 1 files (read as they are) have no bn: one image per unit.
            nb=row["bn"] if "bn" in row.keys() else 1,
            cl=row["cl"] if "cl" in row.keys() else 1,  # before schema version 4
            prediction=latest_prediction(conn, row["id"], run.gpu_spec),
            measured_ms=measured, counters=counters))
    return out


def best_candidate(candidates, strategy, measured, brick_edge=None):
    """The fastest candidate of `strategy` (optionally of one brick edge), by measured or
    predicted time; infeasible predictions never win. None when there is none."""
    pool = []
    for c in candidates:
        if c.strategy != strategy or (brick_edge is not None and c.bh != brick_edge):
            continue
        if c.prediction is not None and not c.prediction["feasible"]:
            continue
        t = c.time(measured)
        if t is not None:
            pool.append((t, c.id, c))
    return min(pool)[2] if pool else None


def _why_missing(candidates, strategy, brick_edge=None):
    """Why a strategy (of a brick edge) has no bar: the model's reason when every candidate
    is infeasible, else that it was not measured / predicted."""
    pool = [c for c in candidates if c.strategy == strategy
            and (brick_edge is None or c.bh == brick_edge)]
    if not pool:
        return "not in the search space"
    if all(c.prediction is not None and not c.prediction["feasible"] for c in pool):
        return "infeasible: " + (pool[0].prediction["reason"] or "(model)")
    return "no result"


class RunGroups:
    """The groups a run considered (run_groups), their candidates, and layerwise execution of
    any layer range: the group's own layerwise candidate when the space has one, else one
    single-layer layerwise candidate per layer (a library kernel per layer)."""

    def __init__(self, conn, run):
        self.conn, self.run = conn, run
        self.rows = conn.execute("SELECT rg.*, w.description FROM run_groups rg JOIN workloads "
                                 "w ON w.id = rg.workload_id WHERE rg.run_id = ? ORDER BY "
                                 "rg.first_layer, rg.last_layer", (run.id,)).fetchall()
        self.workload = {(r["first_layer"], r["last_layer"]): r["workload_id"]
                         for r in self.rows}
        self._candidates = {}

    def description(self, first, last):
        """The workload description of a group ('conv3x3x3 3->3 48x48x48 +relu | ...')."""
        return next((r["description"] for r in self.rows
                     if (r["first_layer"], r["last_layer"]) == (first, last)), "")

    def candidates(self, first, last):
        w = self.workload.get((first, last))
        if w is None:
            return []
        if w not in self._candidates:
            self._candidates[w] = workload_candidates(self.conn, w, self.run)
        return self._candidates[w]

    def layerwise(self, first, last, measured):
        """[CandidateResult] running layers first..last layer by layer, or None."""
        own = best_candidate(self.candidates(first, last), "layerwise", measured)
        if own is not None:
            return [own]
        parts = []
        for layer in range(first, last + 1):
            c = best_candidate(self.candidates(layer, layer), "layerwise", measured)
            if c is None:
                return None
            parts.append(c)
        return parts


# ---- time breakdowns ---------------------------------------------------------------------

@dataclass
class Breakdown:
    """One bar, in ms or normalized: its total and the model's components scaled to it."""
    total: float
    dram: float = 0.0
    compute: float = 0.0
    atomics_compulsory: float = 0.0
    atomics_conflict: float = 0.0
    source: str = SOURCE_MODEL

    @property
    def idle(self):
        return max(self.total - self.dram, 0.0)

    @property
    def other(self):
        return max(self.total - self.compute - self.atomics_compulsory
                   - self.atomics_conflict, 0.0)

    @property
    def memory_side(self):
        return {"idle": self.idle, "dram": self.dram}

    @property
    def compute_side(self):
        return {"compute": self.compute, "atomics_compulsory": self.atomics_compulsory,
                "atomics_conflict": self.atomics_conflict, "other": self.other}

    def scaled(self, factor):
        return Breakdown(self.total * factor, self.dram * factor, self.compute * factor,
                         self.atomics_compulsory * factor, self.atomics_conflict * factor,
                         self.source)

    def as_dict(self):
        d = {"total": self.total, "source": self.source}
        d.update(self.memory_side)
        d.update(self.compute_side)
        return d


def breakdown(prediction, total, source):
    """A bar of `total` ms split by the predicted components' fractions of the predicted
    time (clamped so that each side fits in the bar)."""
    if prediction is None or not prediction["time_ms"] or prediction["time_ms"] <= 0:
        return Breakdown(total, source=source)
    f = total / prediction["time_ms"]
    dram = min(prediction["time_dram_ms"] * f, total)
    comp = [prediction["time_compute_ms"] * f, prediction["time_atomics_compulsory_ms"] * f,
            prediction["time_atomics_conflict_ms"] * f]
    if sum(comp) > total > 0:
        comp = [c * total / sum(comp) for c in comp]
    return Breakdown(total, dram, comp[0], comp[1], comp[2], source)


def sum_breakdowns(bars, source):
    bars = list(bars)
    return Breakdown(sum(b.total for b in bars), sum(b.dram for b in bars),
                     sum(b.compute for b in bars), sum(b.atomics_compulsory for b in bars),
                     sum(b.atomics_conflict for b in bars), source)


def candidate_breakdown(c, measured, run):
    """The bar of one candidate, or of a list of them run one after the other."""
    source = run.measured_source if measured else SOURCE_MODEL
    if isinstance(c, list):
        return sum_breakdowns((candidate_breakdown(x, measured, run) for x in c), source)
    return breakdown(c.prediction, c.time(measured), source)


# ---- Fig 7: end-to-end, seven models ---------------------------------------------------

def gpu_name(fingerprint):
    """'gpu:NVIDIA A100-SXM4-40GB/sm80/...' -> 'NVIDIA A100-SXM4-40GB'; None if not a GPU."""
    if not fingerprint.startswith("gpu:"):
        return None
    return fingerprint[4:].split("/")[0]


@dataclass
class Fig7Model:
    experiment: str
    run: Run
    layerwise_ms: float
    plan_ms: float
    layerwise: Breakdown  # normalized: layerwise total = 1.0
    plan: Breakdown       # normalized
    source: str
    baselines: dict = field(default_factory=dict)  # framework -> {"normalized", "median_ms"}
    notes: list = field(default_factory=list)


def _plan_groups(conn, plan_id):
    """[(candidate_id, first_layer, last_layer)] of a plan, in order."""
    rows = conn.execute("SELECT candidate_id, first_layer, last_layer FROM plan_groups WHERE "
                        "plan_id = ? ORDER BY idx", (plan_id,)).fetchall()
    return [(r["candidate_id"], r["first_layer"], r["last_layer"]) for r in rows]


def _fractions_of(predictions):
    """Summed predicted components of several candidates, as one prediction-like dict."""
    keys = ("time_ms", "time_dram_ms", "time_compute_ms", "time_atomics_compulsory_ms",
            "time_atomics_conflict_ms")
    preds = [p for p in predictions if p is not None]
    if not preds:
        return None
    return {k: sum(p[k] for p in preds) for k in keys}


def fig7_model(conn, run):
    plans = conn.execute("SELECT * FROM plans WHERE run_id = ? ORDER BY id DESC",
                         (run.id,)).fetchall()
    if not plans:
        return None
    notes = []
    measured_plan = next((p for p in plans if p["measured_ms"] is not None
                          and p["layerwise_measured_ms"] is not None), None)
    if measured_plan is not None:
        plan = measured_plan
        plan_ms, layerwise_ms = plan["measured_ms"], plan["layerwise_measured_ms"]
        source = run.measured_source
    else:
        plan = plans[0]
        plan_ms, layerwise_ms = plan["predicted_ms"], plan["layerwise_predicted_ms"]
        source = SOURCE_MODEL
        if plans[0]["measured_ms"] is not None:
            notes.append("plan measured but layerwise not: both shown as predicted")
    groups = _plan_groups(conn, plan["id"])
    plan_pred = _fractions_of(latest_prediction(conn, cid, run.gpu_spec) for cid, _, _ in groups)
    rg = RunGroups(conn, run)
    layer_preds = []
    for _, first, last in groups:
        parts = rg.layerwise(first, last, False)
        layer_preds += [c.prediction for c in parts] if parts else [None]
    if any(p is None for p in layer_preds):
        notes.append("layerwise split from a subset of the layers")
    layer_pred = _fractions_of(layer_preds)
    if not layerwise_ms or layerwise_ms <= 0:
        return None
    model = Fig7Model(
        experiment=run.experiment, run=run, layerwise_ms=layerwise_ms, plan_ms=plan_ms,
        layerwise=breakdown(layer_pred, layerwise_ms, source).scaled(1 / layerwise_ms),
        plan=breakdown(plan_pred, plan_ms, source).scaled(1 / layerwise_ms),
        source=source, notes=notes)
    _attach_baselines(conn, model)
    return model


def _attach_baselines(conn, model):
    run = model.run
    rows = conn.execute("SELECT b.*, t.fingerprint FROM baselines b JOIN targets t ON "
                        "t.id = b.target_id WHERE b.model = ? AND b.batch = ? AND "
                        "b.precision = ? ORDER BY b.id", (run.model, run.batch,
                                                          run.precision)).fetchall()
    if not rows:
        return
    name = gpu_name(run.target)
    comparable = model.source == SOURCE_GPU and name is not None
    for r in rows:  # later rows of a framework replace earlier ones
        if comparable and gpu_name(r["fingerprint"]) == name:
            model.baselines[r["framework"]] = {
                "normalized": r["median_ms"] / model.layerwise_ms, "median_ms": r["median_ms"],
                "p25_ms": r["p25_ms"], "p75_ms": r["p75_ms"]}
    if not model.baselines:
        model.notes.append("framework baselines in the database are not shown: they need the "
                           "layerwise time measured on the same GPU")


def fig7_data(conn, experiments=FIG7_EXPERIMENTS, target_prefix=None):
    """{experiment: Fig7Model or None (no run / no plan)} in the given order."""
    out = {}
    for name in experiments:
        run = find_run(conn, name, target_prefix)
        out[name] = fig7_model(conn, run) if run else None
    return out


# ---- Figs 8-9: ResNet-50 subgraphs -----------------------------------------------------

def natural_key(text):
    return [int(t) if t.isdigit() else t.lower() for t in re.split(r"(\d+)", text)]


@dataclass
class Subgraph:
    label: str
    layer_names: str
    workload: str
    source: str
    chosen: dict          # strategy -> CandidateResult, a list of them (layerwise), or None
    bars: dict            # strategy -> Breakdown in ms (or None)
    normalized: dict      # strategy -> Breakdown relative to layerwise (or None)
    bytes_source: str = SOURCE_MODEL
    transactions: dict = field(default_factory=dict)  # strategy -> (l1, l2, dram) bytes
    ratios: dict = field(default_factory=dict)        # fused strategy -> (l1, l2, dram)
    missing: dict = field(default_factory=dict)       # fused strategy -> why it has no bar


def _choose(rg, first, last, brick_edge=None):
    """Layerwise (a list of candidates) and the best padded and memoized candidate of the
    group first..last: measured when everything that the model can draw has a measurement,
    else predicted for all (a comparison never mixes the two). Returns (chosen, measured)."""
    cands = rg.candidates(first, last)

    def pick(measured):
        out = {s: best_candidate(cands, s, measured, brick_edge) for s in FUSED}
        out["layerwise"] = rg.layerwise(first, last, measured)
        return out

    predicted, measured = pick(False), pick(True)
    wanted = [s for s in STRATEGIES if predicted[s] is not None]
    if wanted and all(measured[s] is not None for s in wanted):
        return measured, True
    return predicted, False


def _transactions(c, gpu):
    """(L1, L2, DRAM) bytes of a candidate (or a list run one after the other): GPU counters
    when `gpu`, else the prediction; None when unknown."""
    if isinstance(c, list):
        parts = [_transactions(x, gpu) for x in c]
        return None if any(p is None for p in parts) else tuple(map(sum, zip(*parts)))
    if gpu:
        return (c.counters[COUNTER_L1], c.counters[COUNTER_L2],
                c.counters[COUNTER_DRAM_READ] + c.counters[COUNTER_DRAM_WRITE])
    p = c.prediction
    return (p["l1_bytes"], p["l2_bytes"], p["dram_bytes"]) if p else None


def _has_gpu_counters(c):
    if isinstance(c, list):
        return all(_has_gpu_counters(x) for x in c)
    return c is not None and all(k in c.counters for k in (
        COUNTER_L1, COUNTER_L2, COUNTER_DRAM_READ, COUNTER_DRAM_WRITE))


def subgraph_data(conn, run):
    """The labelled groups of `run` (run_groups.label), in natural label order."""
    rg = RunGroups(conn, run)
    out = []
    for r in sorted((r for r in rg.rows if r["label"]), key=lambda r: natural_key(r["label"])):
        first, last = r["first_layer"], r["last_layer"]
        chosen, measured = _choose(rg, first, last)
        bars = {s: candidate_breakdown(c, measured, run) if c else None
                for s, c in chosen.items()}
        base = bars["layerwise"].total if bars["layerwise"] else None
        normalized = {s: (b.scaled(1 / base) if b and base else None) for s, b in bars.items()}
        sg = Subgraph(label=r["label"], layer_names=r["layer_names"],
                      workload=r["description"], source=(run.measured_source if measured
                                                         else SOURCE_MODEL),
                      chosen=chosen, bars=bars, normalized=normalized)
        present = [c for c in chosen.values() if c is not None]
        gpu = run.backend == "cuda" and all(_has_gpu_counters(c) for c in present)
        sg.bytes_source = "measured (GPU counters)" if gpu else SOURCE_MODEL
        sg.transactions = {s: _transactions(c, gpu) if c else None for s, c in chosen.items()}
        lw = sg.transactions.get("layerwise")
        for s in FUSED:
            t = sg.transactions.get(s)
            if t and lw and all(x > 0 for x in lw):
                sg.ratios[s] = tuple(a / b for a, b in zip(t, lw))
        sg.missing = {s: _why_missing(rg.candidates(first, last), s) for s in FUSED
                      if chosen[s] is None}
        out.append(sg)
    return out


# ---- Fig 10: partitions of the 6-layer chain ------------------------------------------

@dataclass
class Partition:
    name: str
    groups: list                                  # [(first, last)]
    bars: dict = field(default_factory=dict)      # fused strategy -> Breakdown (ms)
    chosen: dict = field(default_factory=dict)    # fused strategy -> [CandidateResult]
    missing: dict = field(default_factory=dict)   # fused strategy -> why it has no bar


@dataclass
class Fig10Data:
    run: Run
    source: str
    layerwise: Breakdown
    partitions: list
    notes: list = field(default_factory=list)
    first_layer: str = ""  # workload description of the chain's first layer (its shape)


_PARTITION_LABEL = re.compile(r"(\d+(?:\s*\+\s*\d+)*)\s*#\s*(\d+)")


def parse_partition_labels(label):
    """'2+2+2 #1' -> [('2+2+2', 1)]; a label may name several ('2+2+2 #3, 4+2 #2')."""
    return [(re.sub(r"\s+", "", name), int(idx))
            for name, idx in _PARTITION_LABEL.findall(label)]


def _partitions_from_config(config_json):
    """search.partitions from the run's stored config, if it has them: [[2,2,2], ...]."""
    try:
        config = json.loads(config_json or "{}")
    except ValueError:
        return []
    found = []

    def walk(node):
        if isinstance(node, dict):
            for k, v in node.items():
                if k == "partitions" and isinstance(v, list) and all(
                        isinstance(p, list) and p and all(isinstance(x, int) for x in p)
                        for p in v):
                    found.extend(v)
                else:
                    walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(config)
    return found


def partitions_of_run(conn, run):
    """[(name, [(first, last), ...])] from the run's labels, else from its stored config."""
    rows = conn.execute("SELECT first_layer, last_layer, label FROM run_groups WHERE "
                        "run_id = ?", (run.id,)).fetchall()
    by_name = {}
    for r in rows:
        for name, idx in parse_partition_labels(r["label"]):
            by_name.setdefault(name, {})[idx] = (r["first_layer"], r["last_layer"])
    parts = []
    for name, groups in by_name.items():
        parts.append((name, [groups[i] for i in sorted(groups)]))
    if not parts:
        start = min((r["first_layer"] for r in rows), default=1)
        for sizes in _partitions_from_config(run.config_json):
            groups, first = [], start
            for n in sizes:
                groups.append((first, first + n - 1))
                first += n
            parts.append(("+".join(str(n) for n in sizes), groups))
    # The paper's order: finer partitions first, then by the largest group.
    def order(p):
        sizes = [b - a + 1 for a, b in p[1]]
        return (-len(sizes), max(sizes), p[0])
    return sorted(parts, key=order)


def fig10_data(conn, experiment=FIG10_EXPERIMENT, target_prefix=None):
    run = find_run(conn, experiment, target_prefix)
    if run is None:
        return None
    rg = RunGroups(conn, run)
    parts = [Partition(name, gs) for name, gs in partitions_of_run(conn, run)]
    if not parts:
        return Fig10Data(run, SOURCE_MODEL, None, [], ["no partitions found in the run"])
    # Layerwise: the finest partition's groups, layer by layer.
    finest = parts[0]

    def collect(measured):
        lw = [rg.layerwise(a, b, measured) for a, b in finest.groups]
        chosen = {(p.name, s): [best_candidate(rg.candidates(a, b), s, measured)
                                for a, b in p.groups] for p in parts for s in FUSED}
        return lw, chosen

    # Measured only when every bar that the model can draw has all its groups measured.
    lw, chosen = collect(False)
    lw_m, chosen_m = collect(True)
    measured = all(c is not None for c in lw_m) and all(
        all(c is not None for c in chosen_m[k])
        for k, cs in chosen.items() if all(c is not None for c in cs))
    if measured:
        lw, chosen = lw_m, chosen_m
    source = run.measured_source if measured else SOURCE_MODEL
    notes = []
    layerwise = None
    if all(c is not None for c in lw):
        layerwise = sum_breakdowns((candidate_breakdown(c, measured, run) for c in lw), source)
    else:
        notes.append("no layerwise candidate for every layer")
    for p in parts:
        for s in FUSED:
            cs = chosen[(p.name, s)]
            if all(c is not None for c in cs):
                p.chosen[s] = cs
                p.bars[s] = sum_breakdowns((candidate_breakdown(c, measured, run) for c in cs),
                                           source)
            else:
                a, b = p.groups[[c is None for c in cs].index(True)]
                p.missing[s] = f"layers {a}-{b}: " + _why_missing(rg.candidates(a, b), s)
    first = finest.groups[0][0]
    return Fig10Data(run, source, layerwise, parts, notes, rg.description(first, first))


# ---- Fig 11: brick sizes ------------------------------------------------------------------

@dataclass
class Fig11Data:
    run: Run
    source: str
    group: tuple          # (first, last, layer_names)
    layerwise: Breakdown
    bricks: dict          # brick edge -> {strategy: Breakdown}
    chosen: dict          # brick edge -> {strategy: CandidateResult}
    notes: list = field(default_factory=list)
    dims: int = 3         # spatial rank of the bricks
    missing: dict = field(default_factory=dict)  # brick edge -> {strategy: why no bar}
    first_layer: str = ""  # workload description of the group's first layer (its shape)


def fig11_data(conn, experiment=FIG11_EXPERIMENT, target_prefix=None):
    """The run's largest group (the whole chain when max_group_len allows): layerwise vs the
    best padded and memoized candidate of each brick edge."""
    run = find_run(conn, experiment, target_prefix)
    if run is None:
        return None
    rg = RunGroups(conn, run)
    if not rg.rows:
        return Fig11Data(run, SOURCE_MODEL, None, None, {}, {}, ["the run has no groups"])
    row = max(rg.rows, key=lambda r: (r["last_layer"] - r["first_layer"], -r["first_layer"]))
    first, last = row["first_layer"], row["last_layer"]
    cands = rg.candidates(first, last)
    edges = sorted({c.bh for c in cands if c.strategy in FUSED})

    def collect(measured):
        lw = rg.layerwise(first, last, measured)
        chosen = {e: {s: best_candidate(cands, s, measured, e) for s in FUSED} for e in edges}
        return lw, chosen

    # Measured only when every bar that the model can draw has a measurement.
    lw, chosen = collect(False)
    lw_m, chosen_m = collect(True)
    measured = lw_m is not None and all(
        chosen_m[e][s] is not None for e in edges for s in FUSED if chosen[e][s] is not None)
    if measured:
        lw, chosen = lw_m, chosen_m
    source = run.measured_source if measured else SOURCE_MODEL
    bricks = {e: {s: candidate_breakdown(c, measured, run) for s, c in d.items() if c}
              for e, d in chosen.items()}
    layerwise = candidate_breakdown(lw, measured, run) if lw else None
    dims = 3 if any(c.bd > 1 for c in cands if c.strategy in FUSED) else 2
    return Fig11Data(run, source, (first, last, row["layer_names"]), layerwise, bricks, chosen,
                     dims=dims,
                     missing={e: {s: _why_missing(cands, s, e) for s in FUSED
                                  if chosen[e][s] is None} for e in edges},
                     first_layer=rg.description(first, last).split(" | ")[0])


# ---- Fig 12: model vs measurement ---------------------------------------------------------

@dataclass
class AccuracyPoint:
    candidate_id: int
    target: str
    backend: str
    strategy: str
    predicted_ms: float
    measured_ms: float
    predicted_bytes: float = None
    measured_bytes: float = None
    bytes_kind: str = None  # 'DRAM' (GPU counters) | 'L1/L2 issued' (CPU executor counts)


def fig12_data(conn, target_prefix=None):
    """Every candidate with an ok measurement and a prediction for its run's GPU spec; the
    latest measurement per (candidate, target)."""
    sql = ("SELECT m.id, m.candidate_id, m.median_ms, r.gpu_spec, t.fingerprint, t.backend, "
           "c.strategy FROM measurements m JOIN targets t ON t.id = m.target_id JOIN runs r "
           "ON r.id = m.run_id JOIN candidates c ON c.id = m.candidate_id WHERE m.status = "
           "'ok' AND m.median_ms IS NOT NULL ORDER BY m.id")
    latest = {}
    for r in conn.execute(sql).fetchall():
        if target_prefix and not r["fingerprint"].startswith(target_prefix):
            continue
        latest[(r["candidate_id"], r["fingerprint"])] = r
    points = []
    for (cid, fp), r in sorted(latest.items(), key=lambda kv: kv[1]["id"]):
        p = latest_prediction(conn, cid, r["gpu_spec"])
        if p is None or not p["feasible"]:
            continue
        counters = dict(conn.execute("SELECT name, value FROM counters WHERE "
                                     "measurement_id = ?", (r["id"],)).fetchall())
        pt = AccuracyPoint(cid, fp, r["backend"], r["strategy"], p["time_ms"], r["median_ms"])
        if COUNTER_DRAM_READ in counters and COUNTER_DRAM_WRITE in counters:
            pt.predicted_bytes = p["dram_bytes"]
            pt.measured_bytes = counters[COUNTER_DRAM_READ] + counters[COUNTER_DRAM_WRITE]
            pt.bytes_kind = "DRAM"
        elif COUNTER_CPU_LOADED in counters and COUNTER_CPU_STORED in counters:
            pt.predicted_bytes = p["l1_bytes"]
            pt.measured_bytes = counters[COUNTER_CPU_LOADED] + counters[COUNTER_CPU_STORED]
            pt.bytes_kind = "L1/L2 issued"
        points.append(pt)
    return points


def ranks(values):
    """1-based ranks, ties get the mean of their positions."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    out = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            out[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return out


def spearman(xs, ys):
    """Spearman's rank correlation (Pearson on tie-averaged ranks); None if undefined."""
    if len(xs) < 2:
        return None
    rx, ry = ranks(xs), ranks(ys)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    sxy = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    sxx = sum((a - mx) ** 2 for a in rx)
    syy = sum((b - my) ** 2 for b in ry)
    if sxx == 0 or syy == 0:
        return None
    return sxy / math.sqrt(sxx * syy)


def median(values):
    v = sorted(values)
    n = len(v)
    if n == 0:
        return None
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def accuracy_stats(predicted, measured):
    """n, median and worst |predicted - measured| / measured, Spearman rho."""
    pairs = [(p, m) for p, m in zip(predicted, measured) if m and m > 0 and p is not None]
    errors = [abs(p - m) / m for p, m in pairs]
    return {"n": len(pairs), "median_rel_error": median(errors),
            "worst_rel_error": max(errors) if errors else None,
            "spearman": spearman([p for p, _ in pairs], [m for _, m in pairs])}
