#!/usr/bin/python3
"""README figures that come from a run, regenerated from that run's committed record.

A block of README.md between

    <!-- generated: NAME from FILE -->
    ...
    <!-- end generated -->

is written by this script from FILE (a committed record under results/), never typed by hand.

    scripts/readme-blocks.py              rewrite the blocks of README.md from their records
    scripts/readme-blocks.py --check      exit 1 when a block differs from its record (ctest)
    scripts/readme-blocks.py --record-quickstart DIR
                                          write results/quickstart/resnet50-cpu.txt from DIR,
                                          the outputs of scripts/quickstart-record.sh
"""
import csv
import os
import re
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, "README.md")
QUICKSTART = "results/quickstart/resnet50-cpu.txt"
MPI = "results/mpi/scaling.txt"
BLOCK = re.compile(r"(<!-- generated: (\S+) from (\S+) -->\n)(.*?)(<!-- end generated -->)",
                   re.S)


class RecordError(Exception):
    pass


def read_record(path):
    """key: value lines (# comments skipped)."""
    out = {}
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        for line in f:
            if line.startswith("#") or ":" not in line:
                continue
            key, value = line.split(":", 1)
            out[key.strip()] = value.strip()
    return out


def need(record, path, *keys):
    missing = [k for k in keys if k not in record]
    if missing:
        raise RecordError(f"{path} lacks {', '.join(missing)}")
    return [record[k] for k in keys]


def quickstart_block(path):
    r = read_record(path)
    date, machine, t1, v1, m, t2, r2, v2 = need(
        r, path, "date", "machine", "tune1_wall_s", "tune1_validated", "merged_groups",
        "tune2_wall_s", "tune2_resumed", "tune2_validated")
    more = int(v2) - int(r2)
    second = (f"took all {r2} from the database" if more == 0 else
              f"took the {r2} from the database, validated {more} more")
    return (f"On {machine} (recorded {date} in `{path}`), ResNet-50 (batch 8) took "
            f"{float(t1):.0f} s and validated {v1} of the plan's {m} merged groups; a second run "
            f"{second} and took {float(t2):.1f} s.\n")


def run_check_block(path):
    r = read_record(path)
    line, wall, machine = need(r, path, "run_line", "run_wall_s", "machine")
    return (f"`{line}` ({machine}, the reference on one thread; the whole command took "
            f"{float(wall):.0f} s, recorded in `{path}`)\n")


def mpi_block(path):
    """The speedup of 3 ranks (two workers) over one process on mpi_scaling_cpu.yaml: the
    ratio of the median wall times of the repetitions."""
    walls = {}
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        section = None
        for line in f:
            if line.startswith("experiment:"):
                section = line.split()[1].rstrip(";")
                continue
            fields = line.split()
            if section == "mpi_scaling_cpu.yaml" and len(fields) >= 3 and fields[0].isdigit():
                walls.setdefault(int(fields[0]), []).append(float(fields[2]))
    if 1 not in walls or 3 not in walls:
        raise RecordError(f"{path} has no 1-rank and 3-rank runs of mpi_scaling_cpu.yaml")
    speedup = statistics.median(walls[1]) / statistics.median(walls[3])
    return (f"3 ranks (two workers) tune `experiments/mpi_scaling_cpu.yaml` {speedup:.2f}× faster "
            f"than one process (median wall time of {len(walls[3])} repetitions each, "
            f"`{path}`)\n")


# The rows of the model-only table: experiment -> label (results/model/speedups.csv's order).
SPEEDUP_LABELS = {
    "resnet50": "ResNet-50", "drn_c_26": "DRN-C-26", "resnet3d_34": "3D ResNet-34",
    "darknet53": "DarkNet-53", "vgg16_bn": "VGG-16", "deepcam": "DeepCAM",
    "inception_v4": "Inception-v4", "mobilenet_v2": "MobileNetV2",
    "efficientnet_b0": "EfficientNet-B0", "convnext_tiny": "ConvNeXt-T",
    "resnet3d_34_cubes": "3D ResNet-34, cubes only (before)"}


def paper_speedup(model):
    """The paper's measured Fig 7 speedup over its cuDNN (A100-40GB, fp32), or None."""
    sys.path.insert(0, os.path.join(ROOT, "results"))
    import paper_reference  # noqa: E402 (results/, next to the figure scripts)
    bar = paper_reference.FIG7.get(model)
    return None if bar is None else 1 / (bar["brickdl_memory"] + bar["brickdl_compute"])


def speedups_block(path):
    """README's model-only table from results/model/speedups.csv (scripts/model-speedups.sh)."""
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        records = list(csv.DictReader(line for line in f if not line.startswith("#")))
    columns = []
    cells = {}
    for r in records:
        column = (r["gpu"], r["precision"])
        if column not in columns:
            columns.append(column)
        cells.setdefault(r["experiment"], {"model": r["model"], "batch": r["batch"]})[column] = (
            f"{float(r['speedup']):.3f} ({r['merged_groups']}/{r['groups']})")
    if not cells:
        raise RecordError(f"{path} has no rows")
    head = ["model", "batch"] + [f"{g} {p}" for g, p in columns] + ["paper (A100, fp32, measured)"]
    lines = ["| " + " | ".join(head) + " |", "| --- | ---: |" + " ---: |" * (len(columns) + 1)]
    for experiment, c in cells.items():
        paper = paper_speedup(experiment)
        lines.append("| " + " | ".join(
            [SPEEDUP_LABELS.get(experiment, experiment), c["batch"]] +
            [c.get(col, "-") for col in columns] +
            ["-" if paper is None else f"{paper:.3f}"]) + " |")
    return "\n".join(lines) + "\n"


GENERATORS = {"quickstart": quickstart_block, "run-check": run_check_block,
              "mpi-scaling": mpi_block, "model-speedups": speedups_block}


def render(text):
    """README text with every block regenerated; raises RecordError."""
    def one(m):
        name, path = m.group(2), m.group(3)
        if name not in GENERATORS:
            raise RecordError(f"README.md: unknown generated block '{name}'; known: "
                              f"{', '.join(sorted(GENERATORS))}")
        return m.group(1) + GENERATORS[name](path) + m.group(5)
    return BLOCK.sub(one, text)


def record_quickstart(folder):
    """results/quickstart/resnet50-cpu.txt from the outputs in `folder`."""
    def read(name):
        with open(os.path.join(folder, name), encoding="utf-8") as f:
            return f.read()
    meta = dict(l.split(":", 1) for l in read("meta.txt").splitlines() if ":" in l)
    times = dict(l.split() for l in read("times.txt").splitlines() if len(l.split()) == 2)
    checked = re.compile(r"and (\d+) of its (\d+) merged groups were checked against the "
                         r"reference on .+? \((\d+) from the database\)")
    m1, m2 = checked.search(read("tune1.txt")), checked.search(read("tune2.txt"))
    run = [l for l in read("run.txt").splitlines() + read("run.err").splitlines()
           if "plan executed in" in l]
    if not (m1 and m2 and run):
        raise RecordError(f"{folder}: the tune reports or the run's closing line are missing")
    line = run[-1].split("brickdl-run: ", 1)[-1]
    line = re.sub(r"; wrote .*$", "", line)
    out = [
        "# The quick start's run on the development machine, written by",
        "# scripts/readme-blocks.py --record-quickstart from scripts/quickstart-record.sh.",
        f"date: {meta['date'].strip()}",
        f"git: {meta['git'].strip()}",
        f"machine: {meta['machine'].strip()}",
        f"tune1_wall_s: {times['tune1']}",
        f"tune1_validated: {m1.group(1)}",
        f"merged_groups: {m1.group(2)}",
        f"tune2_wall_s: {times['tune2']}",
        f"tune2_resumed: {m2.group(3)}",
        f"tune2_validated: {m2.group(1)}",
        f"run_wall_s: {times['run']}",
        f"run_line: {line}",
    ]
    path = os.path.join(ROOT, QUICKSTART)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(out) + "\n")
    print(f"readme-blocks: wrote {QUICKSTART}")


def main(argv):
    try:
        if argv[:1] == ["--record-quickstart"] and len(argv) == 2:
            record_quickstart(argv[1])
            argv = []
        with open(README, encoding="utf-8") as f:
            text = f.read()
        new = render(text)
    except (RecordError, OSError, KeyError) as e:
        print(f"readme-blocks: {e}", file=sys.stderr)
        return 2
    if argv == ["--check"]:
        if new != text:
            print("readme-blocks: README.md's generated blocks differ from their records; run "
                  "scripts/readme-blocks.py", file=sys.stderr)
            return 1
        print(f"readme-blocks: {len(BLOCK.findall(text))} generated blocks match their records")
        return 0
    if argv:
        print(__doc__, file=sys.stderr)
        return 2
    if new != text:
        with open(README, "w", encoding="utf-8") as f:
            f.write(new)
    print(f"readme-blocks: {len(BLOCK.findall(new))} blocks written")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
