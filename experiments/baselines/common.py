"""What the framework baselines share: the command line, the experiment file, timing statistics
and writing rows into the `baselines` table of a brickdl tuning database.

Exit codes of every baseline script: 0 written, 2 bad input, 3 framework or GPU unavailable
(nothing is written then).
"""
import argparse
import datetime
import json
import os
import re
import sys

import netdefs

EXIT_BAD_INPUT = 2
EXIT_UNAVAILABLE = 3

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "results"))
import brickdl_store  # noqa: E402  (results/: opens and checks tuning databases)

PRECISIONS = ("fp32", "fp16", "bf16")


class BaselineError(Exception):
    """Bad input; the message names the file or flag and what is valid."""


def fail(prog, message, code):
    print(f"{prog}: {message}", file=sys.stderr)
    sys.exit(code)


def unavailable(prog, what):
    """Exits with EXIT_UNAVAILABLE: the framework or the GPU this baseline needs is missing."""
    fail(prog, f"{what}; no baseline written", EXIT_UNAVAILABLE)


# ---- the experiment file ---------------------------------------------------------------------

_TOP_LEVEL = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\s*:\s*(.*?)\s*(?:#.*)?$")


def _scalar(text):
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    return text


def read_experiment(path):
    """The top-level keys a baseline needs (name, model, batch, precision, input_size,
    input_channels, database) from an experiment YAML file.

    A deliberately small reader of top-level `key: scalar` and `key: [a, b]` lines (the
    experiment format of core/experiment.h), so the scripts need no YAML package."""
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise BaselineError(f"{path}: cannot read the experiment file ({e.strerror})")
    out = {}
    for lineno, line in enumerate(lines, 1):
        m = _TOP_LEVEL.match(line)
        if not m or not m.group(2):
            continue
        key, value = m.group(1), m.group(2)
        if value.startswith("["):
            if not value.endswith("]"):
                raise BaselineError(f"{path}:{lineno}: key '{key}': expected a one-line list")
            out[key] = [_scalar(v) for v in value[1:-1].split(",") if v.strip()]
        elif value.startswith("{"):
            out[key] = value  # a mapping (e.g. an inline model); checked below if it matters
        else:
            out[key] = _scalar(value)
    if "model" not in out:
        raise BaselineError(f"{path}: no top-level 'model' key")
    if not isinstance(out["model"], str) or out["model"].startswith("{"):
        raise BaselineError(f"{path}: key 'model': the baselines need a zoo model name "
                            f"({', '.join(netdefs.MODELS)}), not an inline graph")
    out.setdefault("name", os.path.splitext(os.path.basename(path))[0])
    return out


# ---- command line ----------------------------------------------------------------------------

def parse_args(prog, framework, argv=None, extra=None):
    """The shared command line. `framework` is the name written into the database, or a
    function of the parsed arguments returning it; `extra(parser)` adds a script's own flags."""
    p = argparse.ArgumentParser(
        prog=prog,
        description=f"Times the {prog} baseline of a brickdl experiment's model on the GPU "
                    "and writes it into the tuning database's `baselines` table (Fig 7).")
    p.add_argument("experiment", nargs="?", help="experiment YAML (model, batch, precision, "
                   "input size and database come from it)")
    p.add_argument("--model", help="zoo model name (overrides the experiment's)")
    p.add_argument("--batch", type=int, help="batch size (overrides the experiment's)")
    p.add_argument("--precision", choices=PRECISIONS, help="overrides the experiment's")
    p.add_argument("--db", help="tuning database (default: the experiment's `database`, "
                   "else brickdl.db)")
    p.add_argument("--warmup", type=int, default=10, help="untimed runs first (default 10)")
    p.add_argument("--repetitions", type=int, default=50, help="timed runs (default 50)")
    p.add_argument("--tf32", action="store_true",
                   help="allow TF32 tensor-core math for fp32 (default: strict fp32, like "
                        "brickdl's kernels); recorded in the framework name ('-tf32')")
    p.add_argument("--no-flush-l2", action="store_true",
                   help="do not overwrite the L2 cache between repetitions (default: flush, "
                        "as brickdl's measurer does)")
    p.add_argument("--describe", action="store_true",
                   help="print the model's layer count, parameters and MACs and exit (needs "
                        "no framework)")
    if extra is not None:
        extra(p)
    args = p.parse_args(argv)
    try:
        exp = read_experiment(args.experiment) if args.experiment else {}
    except BaselineError as e:
        fail(prog, str(e), EXIT_BAD_INPUT)
    args.model = args.model or exp.get("model")
    if not args.model:
        p.error("give an experiment file or --model")
    args.batch = args.batch if args.batch is not None else int(exp.get("batch", 1))
    args.precision = args.precision or exp.get("precision", "fp32")
    if args.precision not in PRECISIONS:
        fail(prog, f"precision '{args.precision}' is not one of {', '.join(PRECISIONS)}",
             EXIT_BAD_INPUT)
    if args.batch < 1 or args.warmup < 0 or args.repetitions < 1:
        fail(prog, "--batch and --repetitions must be >= 1 and --warmup >= 0", EXIT_BAD_INPUT)
    args.db = args.db or exp.get("database", "brickdl.db")
    try:
        args.net = netdefs.build(args.model, exp.get("input_size"),
                                 int(exp.get("input_channels", 0) or 0))
    except (KeyError, ValueError) as e:
        fail(prog, str(e).strip("'\""), EXIT_BAD_INPUT)
    name = framework(args) if callable(framework) else framework
    args.framework = name + ("-tf32" if args.tf32 and args.precision == "fp32" else "")
    if args.describe:
        n = args.net
        print(f"{n.name}: {len(n.layers) - 1} layers, {n.total_params()} params, "
              f"{n.total_macs()} MACs per sample, input {n.shape(0)}, output "
              f"{n.shape(n.output)}")
        sys.exit(0)
    return args


# ---- statistics --------------------------------------------------------------------------------

def percentile(sorted_values, q):
    """Linear interpolation between closest ranks (numpy's default), q in [0, 1]."""
    if not sorted_values:
        raise ValueError("no samples")
    pos = q * (len(sorted_values) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def summarize(samples_ms):
    s = sorted(samples_ms)
    return {"median_ms": percentile(s, 0.5), "min_ms": s[0], "max_ms": s[-1],
            "p25_ms": percentile(s, 0.25), "p75_ms": percentile(s, 0.75)}


def report(prog, args, samples_ms):
    st = summarize(samples_ms)
    print(f"{prog}: {args.model} batch {args.batch} {args.precision}: median "
          f"{st['median_ms']:.3f} ms (p25 {st['p25_ms']:.3f}, p75 {st['p75_ms']:.3f}, min "
          f"{st['min_ms']:.3f}, max {st['max_ms']:.3f}) over {len(samples_ms)} runs")
    return st


# ---- the database ------------------------------------------------------------------------------

def _now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def open_db(path):
    """Opens (or creates, from core/store/schema.sql) a brickdl tuning database for writing;
    raises BaselineError naming the file when it is not one these scripts can write."""
    try:
        return brickdl_store.open_db(path, write=True, create=True)
    except brickdl_store.StoreError as e:
        raise BaselineError(str(e)) from None


def gpu_fingerprint(name, cc=None, driver=None, cuda=None, cudnn=None):
    """'gpu:<name>/sm<cc>/drv<driver>/cuda<cuda>/cudnn<cudnn>', the tuner's target format;
    unknown parts are left out. Figures match baselines to tuning runs by 'gpu:<name>'."""
    parts = [f"gpu:{name}"]
    for prefix, value in (("sm", cc), ("drv", driver), ("cuda", cuda), ("cudnn", cudnn)):
        if value:
            parts.append(f"{prefix}{value}")
    return "/".join(parts)


def target_id(conn, fingerprint, description):
    """The tuner's own target of the same GPU name when the database has one (so a baseline
    sits on the same target as the tuning runs it is compared with), else this one."""
    name = fingerprint.split("/")[0]
    row = conn.execute("SELECT id FROM targets WHERE backend = 'cuda' AND (fingerprint = ? OR "
                       "substr(fingerprint, 1, ?) = ?) ORDER BY (fingerprint != ?) DESC, id DESC "
                       "LIMIT 1", (name, len(name) + 1, name + "/", name)).fetchone()
    if row:
        return row[0]
    conn.execute("INSERT OR IGNORE INTO targets(fingerprint, backend, description) VALUES "
                 "(?, 'cuda', ?)", (fingerprint, description))
    return conn.execute("SELECT id FROM targets WHERE fingerprint = ?",
                        (fingerprint,)).fetchone()[0]


def write_baseline(db_path, fingerprint, model, batch, precision, framework, samples_ms,
                   description=""):
    """Inserts one `baselines` row (one transaction); returns its id."""
    st = summarize(samples_ms)
    conn = open_db(db_path)
    try:
        conn.execute("BEGIN IMMEDIATE")
        tid = target_id(conn, fingerprint, description)
        cur = conn.execute(
            "INSERT INTO baselines(target_id, model, batch, precision, framework, median_ms, "
            "min_ms, max_ms, p25_ms, p75_ms, samples_json, created_at) VALUES "
            "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (tid, model, batch, precision, framework, st["median_ms"], st["min_ms"],
             st["max_ms"], st["p25_ms"], st["p75_ms"], json.dumps(list(samples_ms)), _now()))
        conn.commit()
        return cur.lastrowid
    finally:
        conn.close()
