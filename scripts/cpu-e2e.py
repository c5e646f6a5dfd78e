#!/usr/bin/env python3
"""Benchmark (c) of the CPU target: whole models end to end on this machine, in one run.

For each model: the plan brickdl-tune makes for the CPU (`--backend cpu`), run by brickdl-run
(layerwise layers on oneDNN, merged groups on the brick kernels); oneDNN layerwise (brickdl-run
without a plan); ONNX Runtime (default CPU provider, the same thread count) on brickdl's own
export of the model; PyTorch eager where torch and torchvision are importable. The engines run
in interleaved rounds (each round: every engine, `--reps` timed runs after `--warmup`), so load
on the machine hits them alike; a ratio is taken per round, and its median and range reported.

  scripts/cpu-e2e.py [--build build] [--out out/cpu-e2e] [--threads N] [--rounds 3]
                     [--reps 5] [--warmup 2] [--models resnet50:1,mobilenet_v2:8,...]
                     [--torch-python PYTHON] [--append]

A model spec is NAME:BATCH or NAME:BATCH:HxW (or DxHxW): a stated reduction of the input.
Writes OUT/e2e.json and OUT/e2e.md (the table the issue asks for); --append keeps the models
already in OUT/e2e.json (a model measured again replaces its row).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

DEFAULT = ("resnet50:1,resnet50:8,mobilenet_v2:1,mobilenet_v2:8,efficientnet_b0:1,"
           "efficientnet_b0:8,convnext_tiny:1,vgg16_bn:1,drn_c_26:1,darknet53:1,inception_v4:1,"
           "deepcam:1:384x576,resnet3d_34:1:16x112x112")
# torchvision's builders of the zoo models it has (PyTorch eager, where installed).
TORCHVISION = {"resnet50": "resnet50", "mobilenet_v2": "mobilenet_v2",
               "efficientnet_b0": "efficientnet_b0", "convnext_tiny": "convnext_tiny",
               "vgg16_bn": "vgg16_bn", "inception_v4": None}


def parse(spec):
    parts = spec.split(":")
    size = [int(x) for x in parts[2].split("x")] if len(parts) > 2 else None
    return parts[0], int(parts[1]), size


def size_args(size):
    return ["--input-size", ",".join(map(str, size))] if size else []


def run(cmd, **kw):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stderr[-2000:]}")
    return r.stdout


def brickdl_run(build, model, batch, size, threads, reps, warmup, plan, out):
    cmd = [f"{build}/apps/brickdl-run", "--model", model, "--batch", str(batch),
           "--threads", str(threads), "--repeat", str(reps), "--warmup", str(warmup), "--quiet",
           "--out", out] + size_args(size)
    if plan:  # and the plan against layerwise in the same process (timing.versus_layerwise)
        cmd += ["--plan", plan, "--versus-layerwise"]
    run(cmd)
    m = json.load(open(os.path.join(out, "manifest.json")))
    return m["timing"]["end_to_end_ms"]["median"], m


class Ort:
    def __init__(self, path, threads):
        import numpy as np
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        self.s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        self.version = ort.__version__
        self.feed = {}
        for i in self.s.get_inputs():
            shape = [d if isinstance(d, int) else 1 for d in i.shape]
            self.feed[i.name] = np.random.default_rng(0).uniform(-1, 1, shape).astype(np.float32)

    def time(self, reps, warmup):
        for _ in range(warmup):
            self.s.run(None, self.feed)
        t = []
        for _ in range(reps):
            t0 = time.perf_counter()
            self.s.run(None, self.feed)
            t.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(t)


TORCH_TIMER = r"""
import json, statistics, sys, time
import torch, torchvision
name, batch, size, threads, reps, warmup = json.loads(sys.argv[1])
torch.set_num_threads(threads)
net = getattr(torchvision.models, name)().eval()
x = torch.rand(batch, 3, *size)
with torch.inference_mode():
    for _ in range(warmup):
        net(x)
    t = []
    for _ in range(reps):
        t0 = time.perf_counter()
        net(x)
        t.append((time.perf_counter() - t0) * 1e3)
print(json.dumps({"median": statistics.median(t), "version": torch.__version__}))
"""


class Torch:
    """PyTorch eager (torchvision's model, batch-norm not folded) in a Python of its own
    (--torch-python: an interpreter, or a wrapper that sets its environment), so that torch's
    libraries never enter this process or brickdl's."""

    def __init__(self, python, model, batch, size, threads):
        self.python = python
        self.args = [TORCHVISION[model], batch, size or [224, 224], threads]
        self.version = json.loads(self._run(1, 0))["version"]

    def _run(self, reps, warmup):
        return run([self.python, "-c", TORCH_TIMER, json.dumps(self.args + [reps, warmup])])

    def time(self, reps, warmup):
        return json.loads(self._run(reps, warmup))["median"]


def torch_for(args, model, batch, size):
    if not TORCHVISION.get(model):
        return None, "no torchvision model"
    try:
        return Torch(args.torch_python, model, batch, size, args.threads), ""
    except RuntimeError as e:
        return None, "not installed" if "ModuleNotFoundError" in str(e) else f"failed: {e}"[:200]


def spread(xs):
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "rounds": xs}


def one_model(args, spec):
    model, batch, size = parse(spec)
    tag = f"{model}-b{batch}" + ("-" + "x".join(map(str, size)) if size else "")
    d = os.path.join(args.out, tag)
    os.makedirs(d, exist_ok=True)
    onnx = os.path.join(d, "model.onnx")
    run([f"{args.build}/apps/brickdl-run", "--model", model, "--batch", str(batch),
         "--export-onnx", onnx] + size_args(size))
    t0 = time.time()
    run([f"{args.build}/apps/brickdl-tune", model, "--batch", str(batch), "--backend", "cpu",
         "--db", os.path.join(args.out, "cpu-e2e.db"), "--out", os.path.join(d, "tune"),
         "--top-k", str(args.top_k), "--quiet"] + size_args(size))
    tune_s = time.time() - t0
    plan = os.path.join(d, "tune", "plan.json")
    ort = Ort(onnx, args.threads)
    tv, why = torch_for(args, model, batch, size)
    rows = {"tuned": [], "onednn": [], "ort": [], "torch": []}
    manifest = None
    in_process = []  # layerwise / tuned per run, the two interleaved in one process
    for _ in range(args.rounds):
        t, manifest = brickdl_run(args.build, model, batch, size, args.threads, args.reps,
                                  args.warmup, plan, os.path.join(d, "run-tuned"))
        rows["tuned"].append(t)
        in_process += manifest["timing"]["versus_layerwise"]["speedup"]["rounds"]
        rows["onednn"].append(brickdl_run(args.build, model, batch, size, args.threads,
                                          args.reps, args.warmup, None,
                                          os.path.join(d, "run-onednn"))[0])
        rows["ort"].append(ort.time(args.reps, args.warmup))
        if tv:
            rows["torch"].append(tv.time(args.reps, args.warmup))
    merged = sum(1 for g in manifest["plan_groups"] if g["strategy"] != "layerwise")
    res = {"model": model, "batch": batch, "input_size": size, "tune_s": tune_s,
           "plan_groups": len(manifest["plan_groups"]), "merged_groups": merged,
           "fallbacks": manifest["timing"]["fallbacks"], "ort_version": ort.version,
           "torch": why or tv.version}
    for k, v in rows.items():
        if v:
            res[k + "_ms"] = spread(v)
    res["tuned_vs_onednn"] = spread([o / t for o, t in zip(rows["onednn"], rows["tuned"])])
    res["tuned_vs_onednn_in_process"] = spread(in_process)
    check = json.load(open(os.path.join(d, "tune", "plan.json"))).get("plan_check")
    if check:  # what the tuner's plan check measured (search/plan_check.h)
        res["plan_check"] = {k: check[k] for k in ("merged_groups", "reverted", "fell_back")}
        if check.get("checked_ms") and check.get("layerwise_ms"):
            res["plan_check"]["speedup"] = (check["layerwise_ms"]["median"] /
                                            check["checked_ms"]["median"])
    res["tuned_vs_ort"] = spread([o / t for o, t in zip(rows["ort"], rows["tuned"])])
    return res


def table(results, threads):
    lines = ["| model | batch | input | tuned plan ms | oneDNN layerwise ms | ONNX Runtime ms | "
             "PyTorch eager ms | tuned / oneDNN speedup (range) | same, in one process (range) "
             "| vs ORT | merged groups | plan check |",
             "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for r in results:
        if "error" in r:
            lines.append(f"| {r['spec']} | | | failed: {r['error'][:80]} | | | | | | | | |")
            continue
        s, o = r["tuned_vs_onednn"], r["tuned_vs_ort"]
        p = r.get("tuned_vs_onednn_in_process")
        one = f"{p['median']:.3f} ({p['min']:.3f}-{p['max']:.3f})" if p else "-"
        c = r.get("plan_check")
        if not c:
            checked = "-"
        elif c["merged_groups"] == 0:
            checked = "nothing merged"
        else:
            checked = f"{c['merged_groups'] - c['reverted']} of {c['merged_groups']} kept"
            checked += ", fell back" if c["fell_back"] else ""
            checked += f", {c['speedup']:.3f}x" if "speedup" in c else ""
        torch = f"{r['torch_ms']['median']:.1f}" if "torch_ms" in r else r["torch"]
        size = "x".join(map(str, r["input_size"])) if r["input_size"] else "default"
        lines.append(
            f"| {r['model']} | {r['batch']} | {size} | {r['tuned_ms']['median']:.2f} | "
            f"{r['onednn_ms']['median']:.2f} | {r['ort_ms']['median']:.2f} | {torch} | "
            f"{s['median']:.3f} ({s['min']:.3f}-{s['max']:.3f}) | {one} | {o['median']:.3f} | "
            f"{r['merged_groups']} of {r['plan_groups']} | {checked} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--out", default="out/cpu-e2e")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--top-k", type=int, default=3)
    ap.add_argument("--models", default=DEFAULT)
    ap.add_argument("--append", action="store_true")
    ap.add_argument("--torch-python", default=sys.executable,
                    help="a Python with torch and torchvision (default: this one)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    results = []
    path = os.path.join(args.out, "e2e.json")
    if args.append and os.path.exists(path):
        results = json.load(open(path))["results"]
    for spec in args.models.split(","):
        model, batch, _ = parse(spec)
        results = [r for r in results if r.get("spec") != spec and
                   (r.get("model"), r.get("batch")) != (model, batch)]
        print(f"cpu-e2e: {spec} ...", flush=True)
        try:
            r = one_model(args, spec)
            print(f"cpu-e2e: {spec}: tuned {r['tuned_ms']['median']:.2f} ms, oneDNN "
                  f"{r['onednn_ms']['median']:.2f} ms, ORT {r['ort_ms']['median']:.2f} ms",
                  flush=True)
        except Exception as e:  # one failing model is a row of the table, not the end
            r = {"spec": spec, "error": str(e)}
            print(f"cpu-e2e: {spec} failed: {e}", flush=True)
        results.append(r)
        json.dump({"threads": args.threads, "rounds": args.rounds, "reps": args.reps,
                   "warmup": args.warmup, "results": results},
                  open(path, "w"), indent=1)
    open(os.path.join(args.out, "e2e.md"), "w").write(table(results, args.threads) + "\n")
    print(table(results, args.threads))
    return 0


if __name__ == "__main__":
    sys.exit(main())
