"""brickdl from Python: tune merged execution of a CNN over bricks, run a plan, read a tuning
database.

    import brickdl
    model = brickdl.Model.zoo("resnet50", batch=8)
    plan = brickdl.tune(model, target="H200", precision="tf32", backend="none")
    plan.speedup                 # end to end, layerwise / plan (the model's prediction here)
    plan.frame()                 # one row per group of the plan
    out = brickdl.run(model, inputs=x, check=True)   # numpy in, numpy out, on the CPU
    db = brickdl.Database("brickdl.db"); db.runs(); db.best(model="resnet50")

Everything runs the same C++ library as the command-line programs (brickdl-tune, brickdl-run,
brickdl-query): a plan, a database row and an error message are theirs. Bad input raises
UserError with the message the programs print after "error:"; a bug raises InternalError.
Without a GPU every GPU time is the model's prediction, and says so (Plan.measured_ms is None).
docs/python.md has a worked example.
"""
from __future__ import annotations

import json
import os
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Union

from . import _brickdl
from ._frames import frame, have_pandas, records
from ._progress import ProgressArg, make_progress

__all__ = ["Model", "Plan", "Group", "RunResult", "Database", "tune", "run", "merge",
           "UserError", "InternalError", "Interrupted", "CheckError", "zoo_names"]

UserError = _brickdl.UserError
InternalError = _brickdl.InternalError


class Interrupted(KeyboardInterrupt):
    """Ctrl-C (or another KeyboardInterrupt) stopped brickdl.tune. The run is in the database as
    aborted with everything it measured, as brickdl-tune leaves it; `plan` is its plan."""

    def __init__(self, plan: "Plan") -> None:
        super().__init__(f"run {plan.run_id} interrupted; what was measured is kept in "
                         f"{plan.model.database}")
        self.plan = plan


class CheckError(AssertionError):
    """brickdl.run(check=True): an output differs from the layer-by-layer reference beyond the
    tolerance (brickdl-run --check's exit 1). `result` holds the outputs and the checks."""

    def __init__(self, message: str, result: "RunResult") -> None:
        super().__init__(message)
        self.result = result


def zoo_names() -> List[str]:
    """The models of the zoo (core/zoo.h): the paper's seven, the microbenchmarks, and more."""
    return list(_brickdl.zoo_names())


class Model:
    """A model with its experiment: what brickdl-tune tunes. Make one with Model.zoo,
    Model.onnx or Model.experiment (or brickdl.torch.from_module)."""

    def __init__(self, experiment: Any, keep: Any = None) -> None:
        self._e = experiment
        self._keep = keep  # what the model's file needs kept alive (brickdl.torch's folder)

    @classmethod
    def zoo(cls, name: str, batch: Optional[int] = None, *,
            input_size: Optional[Sequence[int]] = None, input_channels: Optional[int] = None,
            num_classes: Optional[int] = None) -> "Model":
        """A zoo model (zoo_names()) with every experiment key at its default, as
        `brickdl-tune NAME --batch N` tunes it. input_size is [H, W] or [D, H, W]."""
        return cls(_brickdl.zoo_model(name, batch, list(input_size or []), input_channels,
                                      num_classes))

    @classmethod
    def onnx(cls, path: Union[str, os.PathLike], batch: Optional[int] = None) -> "Model":
        """An ONNX file with its own weights, as `brickdl-tune MODEL.onnx` takes it: the file's
        batch unless `batch` (a dynamic batch must be given)."""
        return cls(_brickdl.onnx_model(os.fspath(path), batch))

    @classmethod
    def experiment(cls, path: Union[str, os.PathLike]) -> "Model":
        """The model and settings of an experiment file (experiments/*.yaml), as brickdl-tune
        loads it."""
        return cls(_brickdl.experiment_model(os.fspath(path)))

    def with_settings(self, **settings: Any) -> "Model":
        """This model with settings over its experiment: brickdl-tune's flags (target,
        precision, batch, input_size, calibration, backend, db, out), `seed`, and any key of
        the experiment's `search` or `measurement` section (brick_sizes=[8, 16], top_k=2,
        budget_s=30, ...). Checked as the experiment file's keys are."""
        clean = {k: v for k, v in settings.items() if v is not None}
        return Model(self._e.with_settings(json.dumps(clean)), self._keep)

    name = property(lambda self: self._e.name, doc="The experiment's name.")
    model = property(lambda self: self._e.model, doc="The zoo name, ONNX path or 'custom'.")
    kind = property(lambda self: self._e.kind, doc="'zoo', 'onnx' or 'experiment'.")
    batch = property(lambda self: self._e.batch, doc="The batch size.")
    precision = property(lambda self: self._e.precision, doc="fp32, tf32, bf16 or fp16.")
    target = property(lambda self: self._e.gpu, doc="The GPU spec the model plans for.")
    backend = property(lambda self: self._e.backend, doc="The measuring backend.")
    database = property(lambda self: self._e.database, doc="The tuning database's path.")
    inputs = property(lambda self: dict(self._e.inputs),
                      doc="Each runtime input's name and shape (N, C, [D,] H, W).")

    def describe(self, fused: bool = False, as_frame: bool = True) -> Any:
        """The layers with their op, attributes, inputs, output shape, parameters, MACs and
        output bytes, one row each: the graph as loaded, or with fused=True as tuned
        (batch-norms and activations folded). A DataFrame, or a list of dicts."""
        rows = self._e.describe_rows(fused)
        columns = ["id", "name", "op", "attributes", "inputs", "shape", "params", "macs",
                   "out_bytes"]
        return frame(columns, [[r[c] for c in columns] for r in rows], as_frame)

    def describe_text(self) -> str:
        """brickdl-tune --describe's text: the experiment, its graph and the model's report."""
        return self._e.describe_text()

    def __repr__(self) -> str:
        return (f"brickdl.Model({self.name!r}, {self.kind}, batch {self.batch}, "
                f"{self.precision}, target {self.target})")


def _ratio(num: Optional[float], den: Optional[float]) -> Optional[float]:
    return num / den if num is not None and den else None


@dataclass(frozen=True)
class Group:
    """One group of a plan: its layers (ids of the fused graph), how it runs, and its times
    (predicted by the model; measured when the run measured it) and bytes per memory level."""
    first_layer: int
    last_layer: int
    layers: str
    workload: str
    strategy: str
    brick: Optional[Dict[str, int]]
    threads: Optional[int]
    predicted_ms: float
    measured_ms: Optional[float]
    layerwise_predicted_ms: float
    layerwise_measured_ms: Optional[float]
    l1_bytes: float
    l2_bytes: float
    dram_bytes: float
    dram_lower_bound: float

    @property
    def speedup(self) -> float:
        """Layerwise / this group: measured when both were measured, else predicted (the
        report's speedup column)."""
        measured = _ratio(self.layerwise_measured_ms, self.measured_ms)
        return measured if measured is not None else _ratio(self.layerwise_predicted_ms,
                                                            self.predicted_ms) or 0.0

    @property
    def speedup_measured(self) -> bool:
        """True when speedup compares two measurements."""
        return self.measured_ms is not None and self.layerwise_measured_ms is not None

    @classmethod
    def _from_json(cls, g: Mapping[str, Any]) -> "Group":
        return cls(g["first_layer"], g["last_layer"], g["layers"], g["workload"], g["strategy"],
                   g.get("brick"), g.get("threads"), g["predicted_ms"], g["measured_ms"],
                   g["layerwise_predicted_ms"], g["layerwise_measured_ms"], g["l1_bytes"],
                   g["l2_bytes"], g["dram_bytes"], g["dram_lower_bound"])


class Plan:
    """The result of brickdl.tune: the plan (re-planned with measurements when the run measured,
    else the model's), its groups, end-to-end figures, the run id and the report."""

    def __init__(self, model: Model, outcome: Mapping[str, Any]) -> None:
        self.model = model
        self.run_id: int = outcome["run_id"]
        self.aborted: bool = outcome["aborted"]
        self.report: Dict[str, Any] = outcome["report"]
        self.report_text: str = outcome["report_text"]
        self.log: str = outcome["log"]
        self._result = outcome["result"]
        plan = self.report["plan"]
        self.label: str = plan["label"]
        self.groups: List[Group] = [Group._from_json(g) for g in plan["groups"]]
        self.predicted_ms: float = plan["predicted_ms"]
        self.measured_ms: Optional[float] = plan["measured_ms"]
        self.layerwise_predicted_ms: float = plan["layerwise_predicted_ms"]
        self.layerwise_measured_ms: Optional[float] = plan["layerwise_measured_ms"]
        self.paper_layerwise_predicted_ms: Optional[float] = self.report.get(
            "paper_layerwise_predicted_ms")

    @property
    def speedup(self) -> float:
        """End to end, layerwise / plan, predicted by the model: the figure of the report's
        'end to end (model)' line (printed there to three decimals)."""
        return _ratio(self.layerwise_predicted_ms, self.predicted_ms) or 0.0

    @property
    def measured_speedup(self) -> Optional[float]:
        """End to end, layerwise / plan, measured: when every group and every layerwise baseline
        was measured (the report's 'end to end (measured on ...)' line), else None."""
        return _ratio(self.layerwise_measured_ms, self.measured_ms)

    @property
    def paper_speedup(self) -> Optional[float]:
        """Against the BrickDL paper's own baseline (unfused cuDNN passes), predicted."""
        return _ratio(self.paper_layerwise_predicted_ms, self.predicted_ms)

    status = property(lambda self: self.report["status"], doc="complete or aborted.")
    target = property(lambda self: self.report["target"],
                      doc="Where it measured ('model:H200' for model only, 'gpu:...', 'cpu:...').")
    gpu = property(lambda self: self.report["gpu_spec"], doc="The GPU spec it planned for.")
    precision = property(lambda self: self.report["precision"], doc="The precision.")
    batch = property(lambda self: self.report["batch"], doc="The batch size.")
    backend = property(lambda self: self.report["backend"], doc="The measuring backend.")

    def frame(self, as_frame: bool = True) -> Any:
        """The groups, one row each, with speedup: a DataFrame, or a list of dicts."""
        columns = list(Group.__dataclass_fields__) + ["speedup"]
        rows = [[getattr(g, c) for c in columns] for g in self.groups]
        return frame(columns, rows, as_frame)

    def save(self, folder: Union[str, os.PathLike]) -> None:
        """Writes plan.json and report.txt into `folder`, as brickdl-tune writes them (brickdl-run
        --plan reads that plan.json)."""
        self._result.write(os.fspath(folder))

    def to_json(self) -> str:
        """plan.json's text."""
        return json.dumps(self.report)

    def __str__(self) -> str:
        return self.report_text

    def __repr__(self) -> str:
        merged = sum(g.strategy != "layerwise" for g in self.groups)
        return (f"brickdl.Plan(run {self.run_id}, {self.report['model']}, {self.gpu}, "
                f"{self.precision}, batch {self.batch}: {len(self.groups)} groups, {merged} "
                f"merged, {self.predicted_ms:.4f} ms predicted, speedup {self.speedup:.3f}x)")


def tune(model: Model, target: Optional[str] = None, precision: Optional[str] = None,
         backend: Optional[str] = None, db: Optional[Union[str, os.PathLike]] = None,
         budget_s: Optional[float] = None, *, out: Optional[Union[str, os.PathLike]] = None,
         fresh: bool = False, use_other_targets: bool = False, progress: ProgressArg = None,
         **search_overrides: Any) -> Plan:
    """Tunes `model` as brickdl-tune does (in this process) and returns the Plan.

    target, precision, backend ('none' model only, 'cpu', 'cuda', 'auto'), db (the tuning
    database, default the experiment's) and budget_s (measurement budget) act as brickdl-tune's
    flags; search_overrides are keys of the experiment's `search` and `measurement` sections
    (brick_sizes, strategies, top_k, max_measurements, ...), plus batch, input_size and seed.
    out: also write plan.json and report.txt there. fresh / use_other_targets: brickdl-tune's
    --fresh / --use-other-targets. progress: a callable called with each measured candidate (a
    dict), or True for a bar. The GIL is released while the driver works; Ctrl-C stops the run
    cleanly (it stays in the database as aborted) and raises Interrupted with its plan."""
    settings: Dict[str, Any] = dict(target=target, precision=precision, backend=backend,
                                    db=os.fspath(db) if db is not None else None,
                                    budget_s=budget_s)
    settings.update(search_overrides)
    given = {k: v for k, v in settings.items() if v is not None}
    tuned = model.with_settings(**given) if given else model
    callback, finish = make_progress(progress)
    try:
        outcome = _brickdl.tune(tuned._e, fresh, use_other_targets, callback)
    finally:
        finish()
    plan = Plan(tuned, outcome)
    for line in plan.log.splitlines():
        if line.startswith("warning: "):
            warnings.warn(line[len("warning: "):], RuntimeWarning, stacklevel=2)
    if outcome["interrupted"]:
        raise Interrupted(plan)
    if out is not None:
        plan.save(out)
    return plan


class RunResult:
    """What brickdl.run computed: the outputs (numpy float32 arrays, in the model's output
    order), their names, and with check the comparison with the reference per output."""

    def __init__(self, r: Mapping[str, Any]) -> None:
        self.outputs: List[Any] = list(r["outputs"])
        self.names: List[str] = list(r["names"])
        self.groups: int = r["groups"]
        self.checks: Optional[List[Dict[str, Any]]] = r["check"]
        self.plan_ms: float = r["plan_ms"]
        self.reference_ms: Optional[float] = r["reference_ms"]

    @property
    def output(self) -> Any:
        """The only output of a model that has one."""
        if len(self.outputs) != 1:
            raise UserError(f"the model has {len(self.outputs)} outputs ({', '.join(self.names)}); "
                            "use RunResult.outputs")
        return self.outputs[0]

    @property
    def passed(self) -> Optional[bool]:
        """True when every output matched the reference (None without check)."""
        return None if self.checks is None else all(c["passed"] for c in self.checks)


def _input_arrays(model: Model, inputs: Any) -> List[Any]:
    """`inputs` (None, one array, a list in the model's input order, or a dict by name) as
    float32 C-order arrays in the model's input order."""
    import numpy as np
    names = list(model.inputs)
    if inputs is None:
        return []
    if isinstance(inputs, Mapping):
        unknown = sorted(set(inputs) - set(names))
        missing = [n for n in names if n not in inputs]
        if unknown or missing:
            what = f"no input {unknown[0]!r}" if unknown else f"missing {missing[0]!r}"
            raise UserError(f"brickdl.run inputs: {what}; the model's inputs: {', '.join(names)}")
        arrays = [inputs[n] for n in names]
    elif isinstance(inputs, (list, tuple)):
        arrays = list(inputs)
    else:
        arrays = [inputs]
    if len(arrays) != len(names):
        raise UserError(f"brickdl.run inputs: {len(arrays)} array(s) for {len(names)} input(s) "
                        f"({', '.join(names)}); give one per input, or a dict by name")
    return [np.ascontiguousarray(a, dtype=np.float32) for a in arrays]


def run(model: Model, plan: Optional[Plan] = None, inputs: Any = None, backend: str = "cpu", *,
        check: bool = False, seed: int = 1, threads: int = 0,
        allow_mismatch: bool = False) -> RunResult:
    """Runs `model` on the CPU as brickdl-run does: layer by layer, or by `plan`'s merged groups
    (at the plan's batch and precision). inputs: one array, a list in the model's input order, or
    a dict by name; None: seeded random ones (uniform [-1, 1), from `seed`). Weights are the
    ONNX file's own, else seeded random (from `seed`). check: compare every output with the
    layer-by-layer reference under brickdl-run --check's tolerance; raises CheckError when one
    differs. threads: CPU worker threads (0: every usable CPU). allow_mismatch: run a plan made
    for another model, input size or channel count anyway (brickdl-run --allow-plan-mismatch);
    its groups must still fit the graph."""
    if backend != "cpu":
        raise UserError(f"brickdl.run(backend={backend!r}): plans run on the CPU (backend='cpu'); "
                        "GPU kernels are measured by brickdl.tune(backend='cuda')")
    if plan is not None and (plan.batch, plan.precision) != (model.batch, model.precision):
        model = model.with_settings(batch=plan.batch, precision=plan.precision)
    plan_json = ""
    if plan is not None:
        plan_json = plan.to_json() if not allow_mismatch else json.dumps(
            {"groups": plan.report["plan"]["groups"]})
    r = RunResult(_brickdl.run(model._e, plan_json, _input_arrays(model, inputs), seed, threads,
                               check))
    if check and not r.passed:
        failed = [c for c in r.checks or [] if not c["passed"]]
        raise CheckError(f"the check failed: output '{failed[0]['name']}': {failed[0]['message']}",
                         r)
    return r


def _columns_rows(table: Mapping[str, Any], as_frame: bool) -> Any:
    return frame(table["columns"], table["rows"], as_frame)


class Database:
    """A tuning database, opened read-only through the C++ store (brickdl-query's queries): a
    damaged, foreign or newer file is refused with brickdl-query's message. Tables come as pandas
    DataFrames when pandas is installed (as_frame=False, or no pandas: lists of dicts)."""

    def __init__(self, path: Union[str, os.PathLike], as_frame: bool = True) -> None:
        self._db = _brickdl.Database(os.fspath(path))
        self.as_frame = as_frame and have_pandas()

    path = property(lambda self: self._db.path, doc="The file.")
    schema_version = property(lambda self: self._db.schema_version,
                              doc="Its schema version (an older one is migrated in memory).")

    def runs(self) -> Any:
        """One row per run (brickdl-query runs): id, experiment, model, batch, precision,
        target, kind, status, started_at, ended_at, measurements."""
        return _columns_rows(self._db.runs(), self.as_frame)

    def best(self, model: str = "", gpu: str = "", precision: str = "",
             batch: Optional[int] = None, target: str = "", layer: str = "",
             source: str = "") -> Any:
        """The best configuration per workload, model, precision, batch and source of numbers
        (brickdl-query best --json, nested keys as dotted columns)."""
        return records(self._db.best(model, gpu, precision, batch, target, layer, source),
                       self.as_frame)

    def measurements(self, run: Optional[int] = None, samples: bool = False) -> Any:
        """Every measurement (or one run's), with its candidate, workload, target and the
        prediction for its run's GPU spec: brickdl-query export's CSV columns and values;
        samples adds each measurement's samples_ms."""
        return _columns_rows(self._db.measurements(run, samples), self.as_frame)

    def predictions(self, run: Optional[int] = None) -> Any:
        """The model's predictions for each run's GPU spec, one row per candidate of the run's
        workloads and model version (brickdl-query predictions)."""
        return _columns_rows(self._db.predictions(run), self.as_frame)

    def accuracy(self, run: Optional[int] = None, target: str = "") -> List[Dict[str, Any]]:
        """Predicted vs measured per (target, GPU spec, model version) (brickdl-query accuracy
        --format json)."""
        return self._db.accuracy(run, target)

    def show(self, run: int) -> str:
        """brickdl-query show RUN's text."""
        return self._db.show(run)

    def merge(self, *inputs: Union[str, os.PathLike],
              allow_mixed_targets: bool = False) -> List[Dict[str, Any]]:
        """Copies other databases into this one (brickdl-query merge THIS IN...): all or
        nothing, each input checked first; merging one twice adds nothing. Per input, what was
        added."""
        return merge(self.path, *inputs, allow_mixed_targets=allow_mixed_targets)

    def __repr__(self) -> str:
        return f"brickdl.Database({self.path!r})"


def merge(out: Union[str, os.PathLike], *inputs: Union[str, os.PathLike],
          allow_mixed_targets: bool = False) -> List[Dict[str, Any]]:
    """brickdl-query merge OUT IN...: copies the inputs into OUT (created when missing)."""
    return list(_brickdl.merge(os.fspath(out), [os.fspath(i) for i in inputs],
                               allow_mixed_targets))
