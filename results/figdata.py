"""Reads a brickdl tuning database (core/store/schema.sql) into the numbers of Figs 7-12.

Only the standard library is used here, so the extraction can be tested without matplotlib.

Conventions (see results/README.md):
- A figure looks for the runs of its experiment (runs.experiment); where none exists, for
  runs of the same model under another name (runs.model: a renamed copy of the experiment
  file, or one tuned with overrides); Fig 8 for a ResNet-50 run with groups labelled
  'subgraph N'. Of the GPU specs and precisions these runs have, the one that covers most of
  the figure's experiments is picked (ties: the one of the latest run); `RunFilter` (--target,
  --gpu, --precision, --batch) restricts the runs first. Per experiment the run of its own
  name wins, then complete runs over running / aborted ones, then the latest.
- A candidate's measured time is the median of its latest `ok` measurement on the run's
  target (of this run if there is one, else of any earlier run: resumed tunings reuse them);
  its predicted time is the latest prediction for the run's GPU spec.
- Bars that are compared with each other use one kind of number: measured when every bar of
  the comparison has a measurement, else predicted for all of them.
- Two layerwise baselines (DESIGN.md 8b): L, the layerwise candidates (cuDNN fused: conv +
  bias + activation in one call), and U, the paper's own unfused cuDNN baseline: predicted in
  baseline_predictions (schema version 5), measured as the counter variant.paper_unfused_ms of
  the layerwise candidate's measurement (GPU only). A comparison against U is one of its own,
  all measured or all predicted like any other.
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
import paper_reference as ref  # noqa: E402

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
# The paper's unfused baseline measured on a GPU next to the layerwise candidate (ms): cold
# (L2 flushed, as every other time) and warm.
COUNTER_PAPER_UNFUSED = "variant.paper_unfused_ms"
COUNTER_PAPER_UNFUSED_WARM = "variant.paper_unfused_warm_ms"
# baseline_predictions.baseline of the paper's unfused cuDNN baseline.
PAPER_UNFUSED = "paper-unfused"

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

    @property
    def config(self):
        """The run's stored experiment configuration (runs.config_json), {} if unreadable."""
        try:
            config = json.loads(self.config_json or "{}")
        except ValueError:
            return {}
        return config if isinstance(config, dict) else {}

    @property
    def overrides(self):
        """What the command line overrode in the experiment file ({"gpu": "H200", "batch": 8}
        in config_json's "overrides"); {} when nothing was."""
        o = self.config.get("overrides")
        return o if isinstance(o, dict) else {}

    def describe(self):
        return (f"target {self.target} · model spec {self.gpu_spec} · batch {self.batch} · "
                f"{self.precision}")


_RUN_SQL = ("SELECT r.*, t.fingerprint AS target, t.backend AS backend FROM runs r "
            "JOIN targets t ON t.id = r.target_id")


def _run_of(row):
    return Run(id=row["id"], experiment=row["experiment"], model=row["model"],
               batch=row["batch"], precision=row["precision"], gpu_spec=row["gpu_spec"],
               target_id=row["target_id"], target=row["target"], backend=row["backend"],
               status=row["status"], config_json=row["config_json"])


def find_run(conn, experiment, target_prefix=None):
    """The latest run of the experiment named `experiment` (complete runs first), or None."""
    sql = _RUN_SQL + " WHERE r.experiment = ?"
    args = [experiment]
    if target_prefix:
        sql += " AND substr(t.fingerprint, 1, ?) = ?"
        args += [len(target_prefix), target_prefix]
    sql += " ORDER BY (r.status = 'complete') DESC, r.id DESC LIMIT 1"
    row = conn.execute(sql, args).fetchone()
    return _run_of(row) if row is not None else None


@dataclass(frozen=True)
class RunFilter:
    """Which runs the figures may use: --target (a fingerprint prefix), --gpu (runs.gpu_spec),
    --precision and --batch; None leaves a field free."""
    target_prefix: str = None
    gpu_spec: str = None
    precision: str = None
    batch: int = None

    def admits(self, run):
        return ((not self.target_prefix or run.target.startswith(self.target_prefix))
                and (self.gpu_spec is None or run.gpu_spec.lower() == self.gpu_spec.lower())
                and (self.precision is None or run.precision == self.precision)
                and (self.batch is None or run.batch == self.batch))

    def describe(self):
        parts = [("--target", self.target_prefix), ("--gpu", self.gpu_spec),
                 ("--precision", self.precision), ("--batch", self.batch)]
        return " ".join(f"{k} {v}" for k, v in parts if v is not None and v != "")


@dataclass(frozen=True)
class Wanted:
    """What a figure looks for: runs of `experiment`; where there is none, runs of the zoo
    model `model` under another name (with groups labelled 'subgraph N' when `subgraphs`)."""
    key: str
    experiment: str
    model: str
    subgraphs: bool = False


def all_runs(conn):
    """Every run, oldest first."""
    return [_run_of(r) for r in conn.execute(_RUN_SQL + " ORDER BY r.id").fetchall()]


def _subgraph_runs(conn):
    """Ids of the runs with a group labelled 'subgraph N' (the Fig 8 experiment's kind)."""
    return {r[0] for r in conn.execute("SELECT DISTINCT run_id FROM run_groups WHERE label "
                                       "LIKE 'subgraph %'").fetchall()}


def _recency(run):
    return (run.status == "complete", run.id)


@dataclass
class FoundRuns:
    """The runs a figure found (find_runs): per wanted key, the runs of the picked GPU spec
    and precision, best first."""
    wanted: list
    runs: dict                   # key -> [Run], best first
    config: tuple = None         # (gpu_spec, precision) picked, None when no run was found
    other_configs: list = field(default_factory=list)  # [(gpu_spec, precision)] not picked
    filter: RunFilter = field(default_factory=RunFilter)

    def best(self, key, backends=None):
        """The best run of `key` (of a backend in `backends` when given), or None."""
        return next((r for r in self.runs.get(key, [])
                     if backends is None or r.backend in backends), None)

    def _wanted_of(self, run):
        return next((w for w in self.wanted if run in self.runs.get(w.key, [])), None)

    def by_other_name(self, run):
        """Whether `run` was found by its model (or labels), not by the experiment's name."""
        w = self._wanted_of(run)
        return w is not None and run.experiment != w.experiment

    def other_batches(self, run):
        """Batches of the other runs found for the same experiment as `run`, at the picked
        GPU spec and precision."""
        w = self._wanted_of(run)
        return sorted({r.batch for r in self.runs.get(w.key, [])} - {run.batch}) if w else []

    def describe(self, shown):
        """Lines saying what was picked, for a figure showing the runs `shown` ({label: Run
        or None}): the GPU spec and precision when others exist, runs found by model name,
        overrides and other batches."""
        lines = []
        if self.config and self.other_configs:
            others = ", ".join(f"{g} · {p}" for g, p in self.other_configs)
            lines.append(f"picked model spec {self.config[0]} · {self.config[1]} (most of the "
                         f"figure's experiments, then the latest run); also in the database: "
                         f"{others}; choose with --gpu / --precision")
        found, overridden, batches = [], [], []
        for key, run in shown.items():
            if run is None:
                continue
            if self.by_other_name(run):
                found.append(f"{key} = run {run.id} '{run.experiment}'")
            if run.overrides:
                overridden.append(f"{key}: " + ", ".join(
                    f"{k}={_flat(v)}" for k, v in sorted(run.overrides.items())))
            other = self.other_batches(run)
            if other:
                batches.append(f"{key} batch {run.batch} (latest; also "
                               f"{', '.join(map(str, other))}: --batch)")
        if found:
            lines.append("found by model name (no run of the experiment's own name): "
                         + "; ".join(found))
        if overridden:
            lines.append("tuned with overrides: " + "; ".join(overridden))
        if batches:
            lines.append("several batches: " + "; ".join(batches))
        if self.filter.describe():
            lines.append("runs restricted by " + self.filter.describe())
        return lines


def _flat(value):
    return "x".join(map(str, value)) if isinstance(value, list) else str(value)


def find_runs(conn, wanted, run_filter=None):
    """The runs of each `Wanted` (a list), restricted by `run_filter`, at one GPU spec and
    precision for the whole figure: the one with runs of the most wanted keys, ties broken by
    the latest run (complete runs first). Per key, runs of the experiment's own name come
    first, then runs whose purpose fits (a 'subgraph N' labelled run only where subgraphs are
    wanted), then complete runs, then the latest."""
    flt = run_filter or RunFilter()
    labelled = _subgraph_runs(conn)
    runs = [r for r in all_runs(conn)
            if not flt.target_prefix or r.target.startswith(flt.target_prefix)]

    def matches(w, r):
        if r.experiment == w.experiment:
            return True
        return r.model == w.model and (not w.subgraphs or r.id in labelled)

    matching = {w.key: [r for r in runs if matches(w, r)] for w in wanted}
    admitted = {k: [r for r in rs if flt.admits(r)] for k, rs in matching.items()}
    configs = {}
    for key, rs in admitted.items():
        for r in rs:
            c = configs.setdefault((r.gpu_spec, r.precision), {"keys": set(), "latest": None})
            c["keys"].add(key)
            c["latest"] = max(c["latest"] or _recency(r), _recency(r))
    found = FoundRuns(wanted=list(wanted), runs={w.key: [] for w in wanted}, filter=flt)
    if not configs:
        return found
    found.config = max(configs, key=lambda c: (len(configs[c]["keys"]), configs[c]["latest"]))
    found.other_configs = sorted({(r.gpu_spec, r.precision) for rs in matching.values()
                                  for r in rs} - {found.config})
    for w in wanted:
        rs = [r for r in admitted[w.key] if (r.gpu_spec, r.precision) == found.config]
        found.runs[w.key] = sorted(rs, key=lambda r: (
            r.experiment == w.experiment, (r.id in labelled) == w.subgraphs, _recency(r)),
            reverse=True)
    return found


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


# ---- the paper's unfused baseline (U) --------------------------------------------------------

_PREDICTION_SUMS = ("time_ms", "time_dram_ms", "time_l2_ms", "time_compute_ms",
                    "time_atomics_compulsory_ms", "time_atomics_conflict_ms", "time_other_ms",
                    "flops", "l1_bytes", "l2_bytes", "dram_bytes")


def schema_version_of(conn):
    row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    return int(row[0]) if row is not None and str(row[0]).isdigit() else None


def has_table(conn, name):
    return conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                        (name,)).fetchone() is not None


class PaperBaseline:
    """The paper's own cuDNN baseline (U) of a run's layerwise candidates: predicted from
    baseline_predictions (the latest row of the run's GPU spec, as predictions are taken),
    measured from the counter variant.paper_unfused_ms of the layerwise candidates'
    measurements (GPU only). A layer range run layer by layer (several layerwise candidates)
    adds up its candidates' rows and counters, as its L bar adds up their times."""

    def __init__(self, conn, run):
        self.conn, self.run = conn, run
        self.table = has_table(conn, "baseline_predictions")
        self._rows = {}

    def absent_reason(self):
        """Why the database has no prediction of U at all, or None when it may have some."""
        if self.table:
            return None
        return (f"the paper's baseline (U) is absent: this database (schema version "
                f"{schema_version_of(self.conn)}) has no baseline_predictions table (schema 5 "
                "and later); tune again with a brickdl that writes it")

    def row(self, workload_id):
        if not self.table:
            return None
        if workload_id not in self._rows:
            r = self.conn.execute(
                "SELECT * FROM baseline_predictions WHERE workload_id = ? AND gpu_spec = ? AND "
                "baseline = ? ORDER BY rowid DESC LIMIT 1",
                (workload_id, self.run.gpu_spec, PAPER_UNFUSED)).fetchone()
            self._rows[workload_id] = dict(r) if r is not None else None
        return self._rows[workload_id]

    def predicted(self, parts):
        """(prediction-like dict summed over `parts`, None) or (None, why not)."""
        if not parts:
            return None, "no layerwise candidate to stand for"
        if not self.table:
            return None, self.absent_reason()
        rows = [self.row(c.workload_id) for c in parts]
        if any(r is None for r in rows):
            return None, (f"the paper's baseline (U) is absent: no '{PAPER_UNFUSED}' row in "
                          f"baseline_predictions for model spec {self.run.gpu_spec}")
        return {k: sum(r[k] for r in rows) for k in _PREDICTION_SUMS}, None

    def measured(self, parts):
        """(ms summed over `parts`, None) or (None, why not)."""
        if self.run.backend != "cuda":
            kind = "CPU" if self.run.backend == "cpu" else "model-only"
            return None, (f"U not measured: a {kind} run; only the GPU backend runs the paper's "
                          "baseline")
        if not parts or any(COUNTER_PAPER_UNFUSED not in c.counters for c in parts):
            return None, (f"U not measured: no {COUNTER_PAPER_UNFUSED} counter on the layerwise "
                          "measurement")
        return sum(c.counters[COUNTER_PAPER_UNFUSED] for c in parts), None

    def bar(self, predicted_parts, measured_parts, measured):
        """U as a bar in ms of the kind `measured` (with the predicted components' fractions),
        and the predicted sums: (Breakdown, predicted dict or None, None) or
        (None, None, why not)."""
        pred, why = self.predicted(predicted_parts)
        if measured:
            ms, why_m = self.measured(measured_parts)
            if ms is None:
                return None, None, why_m
            return breakdown(pred, ms, self.run.measured_source), pred, None
        if pred is None:
            return None, None, why
        return breakdown(pred, pred["time_ms"], SOURCE_MODEL), pred, None


def _flat_parts(lists):
    """Candidates of several layer ranges in one list; None when any range has none."""
    if lists is None or any(x is None for x in lists):
        return None
    return [c for x in lists for c in x]


# ---- Fig 7: end-to-end, seven models ---------------------------------------------------

def gpu_name(fingerprint):
    """'gpu:NVIDIA A100-SXM4-40GB/sm80/...' -> 'NVIDIA A100-SXM4-40GB'; None if not a GPU."""
    if not fingerprint.startswith("gpu:"):
        return None
    return fingerprint[4:].split("/")[0]


@dataclass
class AgainstUnfused:
    """A comparison against the paper's unfused baseline U: U, the honest layerwise L and the
    merged bars, all measured (the comparison against L is measured and U has a measurement)
    or all predicted. `bars` in ms; `normalized` relative to U."""
    source: str
    bars: dict                                   # 'unfused', 'layerwise', ... -> Breakdown
    chosen: dict = field(default_factory=dict)   # key -> candidate(s) behind a bar
    note: str = None  # why it is predicted where the comparison against L is measured
    baselines: dict = field(default_factory=dict)  # Fig 7 frameworks -> {"normalized": ...}

    @property
    def unfused_ms(self):
        return self.bars["unfused"].total

    @property
    def normalized(self):
        return {k: (b.scaled(1 / self.unfused_ms) if b is not None else None)
                for k, b in self.bars.items()}


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
    against_unfused: AgainstUnfused = None  # bars 'unfused', 'layerwise', 'plan'
    unfused_missing: str = None             # why there is no comparison against U


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
    _fig7_against_unfused(conn, model, rg, plan, groups, plan_pred, layer_pred)
    return model


def _fig7_against_unfused(conn, model, rg, plan, groups, plan_pred, layer_pred):
    """The end-to-end comparison against U: U of the plan's groups run layer by layer (the
    same layerwise candidates as L) next to L and the plan."""
    run = model.run
    pb = PaperBaseline(conn, run)
    pred_parts = _flat_parts([rg.layerwise(a, b, False) for _, a, b in groups])
    honest_measured = model.source != SOURCE_MODEL
    meas_parts = (_flat_parts([rg.layerwise(a, b, True) for _, a, b in groups])
                  if honest_measured else None)
    why_not_measured = pb.measured(meas_parts)[1] if honest_measured else None
    measured = honest_measured and why_not_measured is None
    unfused, _, why = pb.bar(pred_parts, meas_parts, measured)
    if unfused is None:
        model.unfused_missing = why
        return
    if measured:
        l_ms, p_ms, source = plan["layerwise_measured_ms"], plan["measured_ms"], model.source
    else:
        l_ms, p_ms, source = plan["layerwise_predicted_ms"], plan["predicted_ms"], SOURCE_MODEL
    view = AgainstUnfused(source, {"unfused": unfused,
                                   "layerwise": breakdown(layer_pred, l_ms, source),
                                   "plan": breakdown(plan_pred, p_ms, source)},
                          note=why_not_measured)
    if measured:  # the frameworks were measured on the same GPU as U
        view.baselines = {f: {"normalized": b["median_ms"] / view.unfused_ms,
                              "median_ms": b["median_ms"]} for f, b in model.baselines.items()}
    model.against_unfused = view


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


def fig7_runs(conn, run_filter=None, experiments=FIG7_EXPERIMENTS):
    """The runs of the seven models (FoundRuns): by experiment name, else by runs.model."""
    return find_runs(conn, [Wanted(n, n, n) for n in experiments], run_filter)


def fig7_data(conn, experiments=FIG7_EXPERIMENTS, target_prefix=None, run_filter=None,
              found=None):
    """{experiment: Fig7Model or None (no run / no plan)} in the given order."""
    if found is None:
        flt = run_filter or RunFilter(target_prefix=target_prefix)
        found = fig7_runs(conn, flt, experiments)
    out = {}
    for name in experiments:
        run = found.best(name)
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
    against_unfused: AgainstUnfused = None  # bars 'unfused', 'layerwise', 'padded', 'memoized'
    unfused_missing: str = None             # why there is no comparison against U
    # Fig 9 against U: predicted bytes (U has no counters), of the best-predicted candidates.
    unfused_transactions: tuple = None      # U's (l1, l2, dram) bytes
    unfused_ratios: dict = field(default_factory=dict)  # fused strategy -> (l1, l2, dram) / U


def fig8_runs(conn, run_filter=None):
    """The Fig 8 experiment's runs (FoundRuns, key 'fig8'): by its name, else a ResNet-50 run
    whose groups are labelled 'subgraph N'."""
    return find_runs(conn, [Wanted("fig8", FIG8_EXPERIMENT, "resnet50", subgraphs=True)],
                     run_filter)


def _against_unfused(rg, pb, first, last, honest_measured, brick_edge=None):
    """The comparison of a group against U: U, L and the best padded and memoized candidate
    (of a brick edge), measured when the comparison against L is and U has a measurement,
    else all predicted. Returns (AgainstUnfused, None) or (None, why there is none)."""
    run = rg.run
    pred_parts = rg.layerwise(first, last, False)
    meas_parts = rg.layerwise(first, last, True) if honest_measured else None
    why_not_measured = pb.measured(meas_parts)[1] if honest_measured else None
    measured = honest_measured and why_not_measured is None
    unfused, _, why = pb.bar(pred_parts, meas_parts, measured)
    if unfused is None:
        return None, why
    cands = rg.candidates(first, last)
    chosen = {s: best_candidate(cands, s, measured, brick_edge) for s in FUSED}
    chosen["layerwise"] = meas_parts if measured else pred_parts
    bars = {"unfused": unfused}
    bars.update({s: candidate_breakdown(c, measured, run) if c else None
                 for s, c in chosen.items()})
    return AgainstUnfused(run.measured_source if measured else SOURCE_MODEL, bars, chosen,
                          note=why_not_measured), None


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
    pb = PaperBaseline(conn, run)
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
        sg.against_unfused, sg.unfused_missing = _against_unfused(rg, pb, first, last,
                                                                  measured)
        upred, _ = pb.predicted(rg.layerwise(first, last, False))
        if upred is not None:
            u = (upred["l1_bytes"], upred["l2_bytes"], upred["dram_bytes"])
            sg.unfused_transactions = u
            for s in FUSED:
                c = best_candidate(rg.candidates(first, last), s, False)
                t = _transactions(c, False) if c else None
                if t and all(x > 0 for x in u):
                    sg.unfused_ratios[s] = tuple(a / b for a, b in zip(t, u))
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
    unfused: Breakdown = None  # U in ms, of the same kind as the bars (None: unfused_missing)
    unfused_missing: str = None

    @property
    def shape(self):
        return layer_shape(self.first_layer)


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


_SHAPE = re.compile(r"->\s*\d+\s+(\d+(?:x\d+)+)")


def layer_shape(description):
    """'conv3x3x3 3->3 64x64x64 +relu' -> (64, 64, 64): a layer's output extents; None if the
    description names none."""
    m = _SHAPE.search(description or "")
    return tuple(int(x) for x in m.group(1).split("x")) if m else None


def micro_runs(found, key):
    """The runs a microbenchmark figure draws, one panel each: the best measured run (CPU or
    GPU backend), then the best model-only run (backend none); either may be missing."""
    return [r for r in (found.best(key, ("cpu", "cuda")), found.best(key, ("none",))) if r]


def fig10_runs(conn, run_filter=None):
    """Fig 10's runs (FoundRuns, key 'fig10'): by experiment name, else runs.model."""
    return find_runs(conn, [Wanted("fig10", FIG10_EXPERIMENT, "micro_graphsize")], run_filter)


def fig11_runs(conn, run_filter=None):
    """Fig 11's runs (FoundRuns, key 'fig11'): by experiment name, else runs.model."""
    return find_runs(conn, [Wanted("fig11", FIG11_EXPERIMENT, "micro_bricksize")], run_filter)


def _unfused_of(pb, lw_predicted, lw_measured, measured):
    """U of a microbenchmark panel, of the panel's kind: (Breakdown, None) or (None, why)."""
    u, _, why = pb.bar(_flat_parts(lw_predicted), _flat_parts(lw_measured), measured)
    return u, why


def fig10_data(conn, run=None, run_filter=None):
    """The partitions of the 6-layer chain in `run` (default: the first of micro_runs)."""
    if run is None:
        runs = micro_runs(fig10_runs(conn, run_filter), "fig10")
        run = runs[0] if runs else None
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
    lw_p = lw
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
    data = Fig10Data(run, source, layerwise, parts, notes, rg.description(first, first))
    data.unfused, data.unfused_missing = _unfused_of(
        PaperBaseline(conn, run), lw_p, lw_m, measured)
    return data


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
    unfused: Breakdown = None  # U in ms, of the same kind as the bars (None: unfused_missing)
    unfused_missing: str = None

    @property
    def shape(self):
        return layer_shape(self.first_layer)


def fig11_data(conn, run=None, run_filter=None):
    """The largest group of `run` (default: the first of micro_runs; the whole chain when
    max_group_len allows): layerwise vs the best padded and memoized candidate of each brick
    edge."""
    if run is None:
        runs = micro_runs(fig11_runs(conn, run_filter), "fig11")
        run = runs[0] if runs else None
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
    lw_p = lw
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
    data = Fig11Data(run, source, (first, last, row["layer_names"]), layerwise, bricks, chosen,
                     dims=dims,
                     missing={e: {s: _why_missing(cands, s, e) for s in FUSED
                                  if chosen[e][s] is None} for e in edges},
                     first_layer=rg.description(first, last).split(" | ")[0])
    data.unfused, data.unfused_missing = _unfused_of(
        PaperBaseline(conn, run), [lw_p], [lw_m], measured)
    return data


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


def fig12_data(conn, target_prefix=None, run_filter=None):
    """Every candidate with an ok measurement and a prediction for its run's GPU spec; the
    latest measurement per (candidate, target); `run_filter` restricts the runs."""
    flt = run_filter or RunFilter(target_prefix=target_prefix)
    sql = ("SELECT m.id, m.candidate_id, m.median_ms, r.gpu_spec, r.precision, r.batch, "
           "t.fingerprint, t.backend, c.strategy FROM measurements m JOIN targets t ON t.id = "
           "m.target_id JOIN runs r ON r.id = m.run_id JOIN candidates c ON c.id = "
           "m.candidate_id WHERE m.status = 'ok' AND m.median_ms IS NOT NULL ORDER BY m.id")
    latest = {}
    for r in conn.execute(sql).fetchall():
        if not flt.admits(Run(id=0, experiment="", model="", batch=r["batch"],
                              precision=r["precision"], gpu_spec=r["gpu_spec"], target_id=0,
                              target=r["fingerprint"], backend=r["backend"], status="",
                              config_json="{}")):
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


# ---- model vs paper: the table behind Figs 7, 8, 10 and 11 ----------------------------------

@dataclass
class VersusRow:
    """One bar of a figure: the paper's value (normalized to its cuDNN baseline) against ours,
    normalized to L (the honest comparison) and to U (the paper's own, reproduced). A value
    is None where ours has no such bar; `notes` say why. `vs_l_source` / `vs_u_source` say
    what each of ours is (measured / predicted): the two comparisons may differ in kind."""
    figure: str
    bar: str
    paper: float
    ours: str = ""                 # which of our runs or panels
    paper_ms: float = None         # Figs 10-11: the paper's bar in ms
    vs_l: float = None
    vs_l_source: str = None
    vs_u: float = None
    vs_u_source: str = None
    config: str = ""               # the candidate(s) behind our bar
    notes: list = field(default_factory=list)  # why a value is missing, ...

    @property
    def gap(self):
        """Ours against U minus the paper's value: how far the model (or measurement) comes to
        the paper on the paper's own terms."""
        return None if self.vs_u is None or self.paper is None else self.vs_u - self.paper


def _config_text(a, b=None):
    def one(c):
        if c is None:
            return ""
        if isinstance(c, list):
            texts = [x.describe() for x in c]
            if all(x.strategy == "layerwise" for x in c):
                return "layerwise"
            return f"{len(texts)} x {texts[0]}" if len(set(texts)) == 1 and len(texts) > 1 \
                else " + ".join(texts)
        return c.describe()
    ta, tb = one(a), one(b)
    return ta if not tb or ta == tb else f"vs L: {ta}; vs U: {tb}"


def _baseline_rows(figure, bar_prefix, ours, paper_ms, honest_l, view, why_u):
    """The paper's cuDNN bar, read both ways: as our L and as our U."""
    u_l = l_u = None
    if view is not None:
        u, lw = view.bars["unfused"].total, view.bars["layerwise"]
        l_u = lw.total / u if lw is not None else None
        u_l = u / lw.total if lw is not None and lw.total else None
    src_u = view.source if view is not None else None
    note_u = [] if view is not None or not why_u else [why_u]
    return [
        VersusRow(figure, f"{bar_prefix}cuDNN, read as L (ours fused)", 1.0, ours, paper_ms,
                  1.0 if honest_l else None, honest_l, l_u, src_u, "layerwise", note_u),
        VersusRow(figure, f"{bar_prefix}cuDNN, read as U (the paper's unfused)", 1.0, ours,
                  paper_ms, u_l, src_u, 1.0 if view is not None else None, src_u,
                  PAPER_UNFUSED, note_u),
    ]


def versus_fig7(data):
    """Fig 7: per model, the paper's cuDNN read both ways, BrickDL and the frameworks."""
    rows = []
    for name, m in data.items():
        paper = ref.FIG7.get(name)
        if paper is None:
            continue
        label = paper["label"]
        if m is None:
            rows.append(VersusRow("Fig 7", f"{label} · BrickDL", paper["brickdl_memory"]
                                  + paper["brickdl_compute"], notes=["no run"]))
            continue
        ours = f"run {m.run.id} '{m.run.experiment}'"
        view = m.against_unfused
        rows += _baseline_rows("Fig 7", f"{label} · ", ours, None, m.source, view,
                               m.unfused_missing)
        rows.append(VersusRow(
            "Fig 7", f"{label} · BrickDL plan", paper["brickdl_memory"] + paper["brickdl_compute"],
            ours, None, m.plan.total, m.source,
            view.normalized["plan"].total if view else None, view.source if view else None,
            "plan", [] if view or not m.unfused_missing else [m.unfused_missing]))
        for framework, key in ref.FIG7_FRAMEWORK_PAPER_KEY.items():
            if framework in m.baselines:
                vu = view.baselines.get(framework) if view else None
                rows.append(VersusRow(
                    "Fig 7", f"{label} · {framework} (the paper: {key})", paper[key], ours,
                    None, m.baselines[framework]["normalized"], SOURCE_GPU,
                    vu["normalized"] if vu else None, SOURCE_GPU if vu else None, framework))
    return rows


def versus_fig8(subgraphs):
    """Fig 8: per subgraph with a paper counterpart ('subgraph N'), the paper's cuDNN read
    both ways, then the best padded and memoized."""
    rows = []
    for sg in subgraphs:
        numbers = re.findall(r"\d+", sg.label)
        if not numbers or not 1 <= int(numbers[-1]) <= len(ref.FIG8):
            continue
        paper = ref.FIG8[int(numbers[-1]) - 1]
        view = sg.against_unfused
        honest_l = sg.source if sg.normalized.get("layerwise") else None
        rows += _baseline_rows("Fig 8", f"{sg.label} · ", "", None, honest_l, view,
                               sg.unfused_missing)
        vn = view.normalized if view else {}
        for s in FUSED:
            b, bu = sg.normalized.get(s), vn.get(s)
            notes = [sg.missing[s]] if b is None and s in sg.missing else []
            if view is None and sg.unfused_missing:
                notes.append(sg.unfused_missing)
            rows.append(VersusRow(
                "Fig 8", f"{sg.label} · {s}", ref.memory_side(paper[s]), "", None,
                b.total if b else None, sg.source if b else None,
                bu.total if bu else None, view.source if bu else None,
                _config_text(sg.chosen.get(s), view.chosen.get(s) if view else None), notes))
    return rows


def _panel_label(data, paper_edge):
    shape = data.shape
    size = "x".join(map(str, shape)) if shape else "size unknown"
    full = shape is not None and all(x == paper_edge for x in shape)
    return f"{data.source}, {data.run.gpu_spec} model spec, {size}" + (
        " (the paper's size)" if full else "")


def _micro_rows(figure, data, paper_edge, paper_cudnn_ms, bars):
    """Rows of one of our microbenchmark panels; `bars` [(name, paper bar, our Breakdown or
    None, config, why none)]."""
    ours = _panel_label(data, paper_edge)
    l_ms = data.layerwise.total if data.layerwise else None
    u_ms = data.unfused.total if data.unfused else None
    view = None
    if data.unfused is not None and data.layerwise is not None:
        view = AgainstUnfused(data.source, {"unfused": data.unfused,
                                            "layerwise": data.layerwise})
    rows = _baseline_rows(figure, "", ours, paper_cudnn_ms, data.source if l_ms else None,
                          view, data.unfused_missing)
    for name, paper_bar, b, config, why in bars:
        paper_ms = paper_bar["idle"] + paper_bar["dram"]
        notes = [why] if b is None and why else []
        if u_ms is None and data.unfused_missing:
            notes.append(data.unfused_missing)
        rows.append(VersusRow(
            figure, name, paper_ms / paper_cudnn_ms, ours, paper_ms,
            b.total / l_ms if b and l_ms else None, data.source if b and l_ms else None,
            b.total / u_ms if b and u_ms else None, data.source if b and u_ms else None,
            config, notes))
    return rows


def versus_fig10(panels):
    """Fig 10: per panel of ours (measured, model-only), each partition x strategy."""
    cudnn = ref.memory_side(ref.FIG10_CUDNN)
    rows = []
    for data in panels:
        if data is None or not data.partitions:
            continue
        parts = {p.name: p for p in data.partitions}
        bars = []
        for name in ref.FIG10_ORDER:
            p = parts.get(name)
            for s in FUSED:
                b = p.bars.get(s) if p else None
                why = (p.missing.get(s, "") if p else "partition not in the run")
                bars.append((f"{name} · {s}", ref.FIG10[name][s], b,
                             _config_text(p.chosen.get(s)) if p and b else "", why))
        rows += _micro_rows("Fig 10", data, ref.FIG10_EDGE, cudnn, bars)
    return rows


def versus_fig11(panels):
    """Fig 11: per panel of ours (measured, model-only), each brick edge x strategy."""
    cudnn = ref.memory_side(ref.FIG11_CUDNN)
    rows = []
    for data in panels:
        if data is None or data.layerwise is None:
            continue
        bars = []
        for edge in sorted(ref.FIG11):
            for s in FUSED:
                b = data.bricks.get(edge, {}).get(s)
                why = data.missing.get(edge, {}).get(s, "") if edge in data.missing else (
                    "brick edge not in the run's search space")
                c = data.chosen.get(edge, {}).get(s)
                bars.append((f"{edge}^3 brick · {s}", ref.FIG11[edge][s], b,
                             _config_text(c) if b else "", why))
        rows += _micro_rows("Fig 11", data, ref.FIG11_EDGE, cudnn, bars)
    return rows


def _cell(value, source):
    if value is None:
        return "n/a"
    return f"{value:.3f} {SOURCE_SHORT.get(source, '')}".rstrip()


def versus_markdown(sections, preamble=()):
    """The model-vs-paper table as Markdown: `sections` [(title, [VersusRow])]. What every
    row of a section shares (the run it comes from, a note) is said once above its table."""
    out = ["# Model vs paper", ""]
    out += list(preamble) + [""]
    for title, rows in sections:
        out += [f"## {title}", ""]
        if not rows:
            out += ["(no data: no run of this figure's experiment in the database)", ""]
            continue
        shared_ours = {r.ours for r in rows}
        shared_notes = [n for n in rows[0].notes if all(n in r.notes for r in rows)]
        said = []
        if len(shared_ours) == 1 and rows[0].ours:
            said.append(f"Ours: {rows[0].ours}.")
        said += [f"All rows: {n}." for n in shared_notes]
        out += said + ([""] if said else [])
        head = ["bar"] + (["ours from"] if len(shared_ours) > 1 else []) + [
            "paper (÷ its cuDNN)", "ours ÷ L", "ours ÷ U", "ours ÷ U − paper", "configuration",
            "note"]
        out += ["| " + " | ".join(head) + " |",
                "| " + " | ".join("---:" if h.startswith(("paper", "ours ÷")) else "---"
                                  for h in head) + " |"]
        for r in rows:
            paper = f"{r.paper:.3f}" + (f" ({r.paper_ms:g} ms)" if r.paper_ms else "")
            gap = f"{r.gap:+.3f}" if r.gap is not None else "n/a"
            note = "; ".join(n for n in r.notes if n not in shared_notes)
            cells = [r.bar] + ([r.ours] if len(shared_ours) > 1 else []) + [
                paper, _cell(r.vs_l, r.vs_l_source), _cell(r.vs_u, r.vs_u_source), gap,
                r.config, note]
            out.append("| " + " | ".join(str(c).replace("|", "/") for c in cells) + " |")
        out.append("")
    return "\n".join(out)
