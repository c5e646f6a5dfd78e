#!/usr/bin/python3
"""Draws the paper's Figs 7-11 and the model-accuracy Fig 12 from a brickdl tuning database.

    figures.py DB OUTDIR [--target PREFIX] [--only fig7,fig8,...]

Every figure is written as OUTDIR/<name>.png and .pdf; OUTDIR/figures.json holds the numbers
behind them. The top panel of Figs 7-11 is ours, the bottom one the paper's A100 values
(results/paper_reference.py). See results/README.md for what each figure shows.
"""
import argparse
import json
import os
import re
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after selecting the Agg backend)
from matplotlib.patches import Patch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import figdata as fd  # noqa: E402
import paper_reference as ref  # noqa: E402

FIGURES = {
    "fig7": "fig7_models",
    "fig8": "fig8_resnet50_subgraphs",
    "fig9": "fig9_resnet50_transactions",
    "fig10": "fig10_graphsize",
    "fig11": "fig11_bricksize",
    "fig12": "fig12_model_accuracy",
}

# The paper's palette.
COLORS = {
    "idle": "#eba9cc", "dram": "#e8351c", "compute": "#0070c0",
    "atomics_compulsory": "#ff9900", "atomics_conflict": "#00b050", "other": "#a6a6a6",
    "layerwise": "#d00000", "plan": "#2e6fbd", "pytorch-eager": "#9c7bd6",
    "torch-compile": "#a9d18e", "jax-xla": "#f4b183", "l1": "#f0a860", "l2": "#a48cf0",
    "dram_tx": "#e00000",
}
LABELS = {
    "idle": "Idle", "dram": "DRAM", "compute": "Compute",
    "atomics_compulsory": "Atomics (compulsory)", "atomics_conflict": "Atomics (conflict)",
    "other": "Other",
}
MEMORY_KEYS = ("idle", "dram")
COMPUTE_KEYS = ("compute", "atomics_compulsory", "atomics_conflict", "other")
STRATEGY_LETTER = {"layerwise": "L", "padded": "P", "memoized": "M"}
PAPER_LETTER = {"cudnn": "C", "padded": "P", "memoized": "M"}
SPLIT_NOTE = ("split: the model's predicted component fractions (scaled to the measured total "
              "where a bar is measured)")
PAPER_TITLE = f"paper: {ref.GPU} ({ref.SOURCE})"


# ---- small drawing helpers ---------------------------------------------------------------

def _no_data(ax, text):
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, fontsize=10,
            wrap=True, color="#444444")
    ax.set_xticks([])


def _source_tag(ax, x, source, fontsize=6):
    """Says at the foot of a bar whether it is measured (GPU / CPU) or predicted (model)."""
    ax.text(x, 0.01, fd.SOURCE_SHORT.get(source, source), ha="center", va="bottom",
            fontsize=fontsize, color="black", rotation=90, transform=ax.get_xaxis_transform(),
            bbox=dict(boxstyle="square,pad=0.1", facecolor="white", edgecolor="none",
                      alpha=0.7))


def _stack(ax, x, width, parts, keys, hatch=None):
    """Stacked bar at x from parts {key: value} in the order of keys."""
    bottom = 0.0
    for k in keys:
        v = parts.get(k, 0.0) or 0.0
        if v > 0:
            ax.bar(x, v, width, bottom=bottom, color=COLORS[k], edgecolor="black",
                   linewidth=0.4, hatch=hatch)
        bottom += v
    return bottom


def _mc_pair(ax, x, width, memory, compute):
    """The paper's M/C bar pair: memory side at x - width/2, compute side at x + width/2."""
    top_m = _stack(ax, x - width / 2, width, memory, MEMORY_KEYS)
    top_c = _stack(ax, x + width / 2, width, compute, COMPUTE_KEYS)
    return max(top_m, top_c)


def _y_limit(ax, tops, floor, cap, headroom=1.1):
    """Sets the y range to fit the bars (with headroom for the legend) but at most `cap`;
    a bar cut by the cap gets its value written at the top."""
    top = max([floor] + [t for _, t in tops])
    limit = min(top * headroom, cap)
    ax.set_ylim(0, limit)
    for x, t in tops:
        if t > limit:
            ax.text(x, limit * 0.97, f"{t:.2f}", ha="center", va="top", fontsize=6,
                    rotation=90, color="black",
                    bbox=dict(boxstyle="square,pad=0.1", facecolor="white", edgecolor="none"))


def _missing_tag(ax, x, why):
    """In place of a bar that does not exist: why (e.g. infeasible under the model)."""
    ax.text(x, 0.02, why[:70], rotation=90, ha="center", va="bottom", fontsize=5.5,
            color="#555555", transform=ax.get_xaxis_transform())


def _side_legend(ax, handles):
    """A legend outside the axes, on the right (the figures keep a margin for it)."""
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.005, 1.0), ncol=1,
              fontsize=7, frameon=False, borderaxespad=0.0)


def _breakdown_legend(ax, extra=()):
    handles = [Patch(facecolor=COLORS[k], edgecolor="black", label=LABELS[k])
               for k in MEMORY_KEYS + COMPUTE_KEYS]
    _side_legend(ax, handles + list(extra))


def _sources_text(sources):
    return ", ".join(sorted(set(sources))) if sources else "no data"


FORMATS = ["png", "pdf"]  # set by --formats


def _finish(fig, outdir, name, title, subtitle, bottom=0.1, right=0.83):
    fig.suptitle(title, fontsize=12, fontweight="bold", y=0.995)
    fig.text(0.5, 0.955, subtitle, ha="center", va="top", fontsize=7.5, color="#222222",
             wrap=True)
    # Fixed margins instead of tight_layout: as readable here and several times faster.
    fig.subplots_adjust(left=0.08, right=right, bottom=bottom, top=0.87, hspace=0.42,
                        wspace=0.25)
    paths = []
    for ext in FORMATS:
        path = os.path.join(outdir, f"{name}.{ext}")
        # No creation date in PDFs: the same data gives the same files.
        fig.savefig(path, dpi=130, metadata={"CreationDate": None} if ext == "pdf" else None)
        paths.append(path)
    plt.close(fig)
    return paths


def _runs_subtitle(runs, sources, note=SPLIT_NOTE):
    if not runs:
        return "no tuning run of this figure's experiment(s) in the database"
    targets = sorted({r.target for r in runs})
    specs = sorted({r.gpu_spec for r in runs})
    batches = sorted({r.batch for r in runs})
    precisions = sorted({r.precision for r in runs})
    line = (f"ours: target {', '.join(targets)} · model spec {', '.join(specs)} · batch "
            f"{', '.join(str(b) for b in batches)} · {', '.join(precisions)} · bars: "
            f"{_sources_text(sources)}")
    return line + ("\n" + note if note else "")


# ---- Fig 7 -----------------------------------------------------------------------------------

def draw_fig7(data, outdir):
    fig, (ax, axp) = plt.subplots(2, 1, figsize=(12, 8.5))
    frameworks = sorted({f for m in data.values() if m for f in m.baselines})
    slots = ["layerwise", "plan"] + frameworks
    width = 0.8 / max(len(slots), 4)
    runs, sources, ticks, ticklabels, tops = [], [], [], [], []
    for i, name in enumerate(data):
        m = data[name]
        label = ref.FIG7.get(name, {}).get("label", name)
        ticks.append(i)
        if m is None:
            ticklabels.append(f"{label}\n(no run)")
            continue
        runs.append(m.run)
        sources.append(m.source)
        ticklabels.append(f"{label}\nb{m.run.batch} {m.run.precision}")
        for j, slot in enumerate(slots):
            x = i + (j - (len(slots) - 1) / 2) * width
            if slot in ("layerwise", "plan"):
                b = m.layerwise if slot == "layerwise" else m.plan
                ax.bar(x, b.dram, width, color=COLORS[slot], edgecolor="black",
                       linewidth=0.5, hatch="\\\\\\")
                ax.bar(x, b.total - b.dram, width, bottom=b.dram, color=COLORS[slot],
                       edgecolor="black", linewidth=0.5, hatch="////", alpha=0.55)
                top, source = b.total, b.source
                paper = ref.FIG7.get(name)
                if paper:
                    pv = 1.0 if slot == "layerwise" else (paper["brickdl_memory"]
                                                          + paper["brickdl_compute"])
                    ax.plot([x], [pv], marker="D", color="black", markersize=4, zorder=5)
            elif slot in m.baselines:
                top = m.baselines[slot]["normalized"]
                source = fd.SOURCE_GPU
                ax.bar(x, top, width, color=COLORS.get(slot, "#cccccc"), edgecolor="black",
                       linewidth=0.5)
                key = ref.FIG7_FRAMEWORK_PAPER_KEY.get(slot)
                if key and name in ref.FIG7:
                    ax.plot([x], [ref.FIG7[name][key]], marker="D", color="black",
                            markersize=4, zorder=5)
            else:
                continue
            tops.append((x, top))
            _source_tag(ax, x, source)
    ax.axhline(1.0, color="red", linestyle="--", linewidth=1)
    ax.set_xticks(ticks, ticklabels, fontsize=8)
    ax.set_xlim(-0.6, len(data) - 0.4)
    ax.set_ylabel("Normalized execution time\n(layerwise = 1, lower is better)")
    ax.set_title("ours", fontsize=9, loc="left")
    handles = [Patch(facecolor=COLORS["layerwise"], edgecolor="black",
                     label="layerwise (library kernels)"),
               Patch(facecolor=COLORS["plan"], edgecolor="black", label="BrickDL plan"),
               Patch(facecolor="white", edgecolor="black", hatch="\\\\\\",
                     label="Memory (DRAM)"),
               Patch(facecolor="white", edgecolor="black", hatch="////",
                     label="Compute & Other")]
    handles += [Patch(facecolor=COLORS.get(f, "#cccccc"), edgecolor="black", label=f)
                for f in frameworks]
    handles.append(plt.Line2D([], [], marker="D", color="black", linestyle="",
                              label=f"paper's value ({ref.GPU})"))
    _side_legend(ax, handles)
    _y_limit(ax, tops, 1.05, 3.0)
    notes = [f"{n}: {t}" for n, m in data.items() if m for t in m.notes]
    if not runs:
        _no_data(ax, "no run of the seven model experiments in this database")

    # The paper's panel.
    pslots = ["cudnn", "brickdl", "torchscript", "xla"]
    pcolors = {"cudnn": COLORS["layerwise"], "brickdl": COLORS["plan"],
               "torchscript": COLORS["torch-compile"], "xla": COLORS["jax-xla"]}
    pw = 0.8 / len(pslots)
    for i, name in enumerate(data):
        paper = ref.FIG7.get(name)
        if not paper:
            continue
        for j, slot in enumerate(pslots):
            x = i + (j - (len(pslots) - 1) / 2) * pw
            if slot in ("cudnn", "brickdl"):
                mem, comp = paper[f"{slot}_memory"], paper[f"{slot}_compute"]
                axp.bar(x, mem, pw, color=pcolors[slot], edgecolor="black", linewidth=0.5,
                        hatch="\\\\\\")
                axp.bar(x, comp, pw, bottom=mem, color=pcolors[slot], edgecolor="black",
                        linewidth=0.5, hatch="////", alpha=0.55)
            else:
                axp.bar(x, paper[slot], pw, color=pcolors[slot], edgecolor="black",
                        linewidth=0.5)
    axp.axhline(1.0, color="red", linestyle="--", linewidth=1)
    axp.set_ylim(0, 1.35)
    axp.set_xticks(range(len(data)), [ref.FIG7.get(n, {}).get("label", n) for n in data],
                   fontsize=8)
    axp.set_ylabel("Normalized execution time\n(cuDNN = 1)")
    axp.set_title(PAPER_TITLE, fontsize=9, loc="left")
    _side_legend(axp, [Patch(facecolor=pcolors[s], edgecolor="black", label=lab) for s, lab in
                       (("cudnn", "cuDNN"), ("brickdl", "BrickDL"),
                        ("torchscript", "TorchScript"), ("xla", "TensorFlow XLA"))])
    subtitle = _runs_subtitle(runs, sources)
    if notes:
        subtitle += "\nnotes: " + "; ".join(notes)
    return _finish(fig, outdir, FIGURES["fig7"],
                   "Fig 7 - End-to-end model inference time, normalized to layerwise",
                   subtitle)


# ---- Fig 8 -----------------------------------------------------------------------------------

def _subgraph_axis_labels(ax, centers, letters_x, letters, group_labels):
    ax.set_xticks(letters_x, letters, fontsize=8, fontweight="bold")
    for c, lab in zip(centers, group_labels):
        ax.text(c, -0.09, lab, ha="center", va="top", transform=ax.get_xaxis_transform(),
                fontsize=8)
    for c in centers[:-1]:
        ax.axvline(c + 0.5 * (centers[1] - centers[0]), color="#bbbbbb", linewidth=0.8)


def _paper_subgraph_index(label):
    """'subgraph 3' -> 2: the paper's subgraph our labelled group stands for, or None."""
    numbers = re.findall(r"\d+", label)
    if numbers and 1 <= int(numbers[-1]) <= len(ref.FIG8):
        return int(numbers[-1]) - 1
    return None


def draw_fig8(run, subgraphs, outdir):
    fig, (ax, axp) = plt.subplots(2, 1, figsize=(13, 9))
    width, step = 0.3, 1.0
    centers, xs, letters, labels, sources, tops = [], [], [], [], [], []
    for i, sg in enumerate(subgraphs):
        base = i * 3.5 * step
        centers.append(base + step)
        labels.append(sg.label)
        sources.append(sg.source)
        for j, s in enumerate(fd.STRATEGIES):
            x = base + j * step
            xs.append(x)
            letters.append(STRATEGY_LETTER[s])
            b = sg.normalized.get(s)
            if b is None:
                _missing_tag(ax, x, sg.missing.get(s, "no layerwise time for every layer"))
                continue
            tops.append((x, _mc_pair(ax, x, width, b.memory_side, b.compute_side)))
            _source_tag(ax, x, b.source)
            k = _paper_subgraph_index(sg.label)
            if k is not None:
                paper = ref.FIG8[k]["cudnn" if s == "layerwise" else s]
                ax.plot([x], [ref.memory_side(paper)], marker="D", color="black",
                        markersize=4, zorder=5)
    if subgraphs:
        _subgraph_axis_labels(ax, centers, xs, letters, labels)
        ax.axhline(1.0, color="black", linestyle="--", linewidth=1)
        _y_limit(ax, tops, 1.15, 3.0)
    else:
        _no_data(ax, f"no labelled subgraphs: no run of experiment '{fd.FIG8_EXPERIMENT}' in "
                     "this database")
    ax.set_ylabel("Normalized execution time\n(layerwise = 1)")
    ax.set_title("ours (L = layerwise, P = padded, M = memoized; each as M | C bar pair)",
                 fontsize=9, loc="left")
    marker = plt.Line2D([], [], marker="D", color="black", linestyle="",
                        label=f"paper's total ({ref.GPU})")
    _breakdown_legend(ax, extra=[marker])

    centers, xs, letters = [], [], []
    for i, sub in enumerate(ref.FIG8):
        base = i * 3.5 * step
        centers.append(base + step)
        for j, key in enumerate(("cudnn", "padded", "memoized")):
            x = base + j * step
            xs.append(x)
            letters.append(PAPER_LETTER[key])
            bar = sub[key]
            _mc_pair(axp, x, width, {k: bar[k] for k in MEMORY_KEYS},
                     {k: bar[k] for k in COMPUTE_KEYS})
    _subgraph_axis_labels(axp, centers, xs, letters,
                          [f"Subgraph {i + 1}" for i in range(len(ref.FIG8))])
    axp.axhline(1.0, color="black", linestyle="--", linewidth=1)
    axp.set_ylim(0, 1.2)
    axp.set_ylabel("Normalized execution time\n(cuDNN = 1)")
    axp.set_title(PAPER_TITLE + " (C = cuDNN, P = padded, M = memoized)", fontsize=9,
                  loc="left")
    subtitle = _runs_subtitle([run] if run else [], sources)
    if subgraphs:
        subtitle += "\nsubgraphs: " + "; ".join(
            f"{sg.label} = {sg.layer_names}" for sg in subgraphs)
    return _finish(fig, outdir, FIGURES["fig8"],
                   "Fig 8 - ResNet-50 subgraphs: layerwise vs best padded vs best memoized",
                   subtitle)


# ---- Fig 9 -----------------------------------------------------------------------------------

def draw_fig9(run, subgraphs, outdir):
    fig, (ax, axp) = plt.subplots(2, 1, figsize=(13, 8.5))
    width = 0.25
    kinds = (("l1", "Global (L1)"), ("l2", "L2"), ("dram_tx", "DRAM"))

    def panel(axis, rows, paper_rows):
        centers, xs, letters = [], [], []
        for i, ratios in enumerate(rows):
            base = i * 2.6
            centers.append(base + 0.5)
            for j, s in enumerate(fd.FUSED):
                x0 = base + j * 1.0
                xs.append(x0)
                letters.append(STRATEGY_LETTER[s])
                r = ratios.get(s)
                for k, (key, _) in enumerate(kinds):
                    x = x0 + (k - 1) * width
                    if r is not None:
                        axis.bar(x, r[k], width, color=COLORS[key], edgecolor="black",
                                 linewidth=0.4)
                    if paper_rows is not None and paper_rows[i] is not None:
                        axis.plot([x], [paper_rows[i][s][k]], marker="D", color="black",
                                  markersize=3.5, zorder=5)
        return centers, xs, letters

    rows = [sg.ratios for sg in subgraphs]
    if subgraphs:
        paper_for_ours = [ref.FIG9[k] if k is not None else None
                          for k in (_paper_subgraph_index(sg.label) for sg in subgraphs)]
        centers, xs, letters = panel(ax, rows, paper_for_ours)
        _subgraph_axis_labels(ax, centers, xs, letters, [sg.label for sg in subgraphs])
        ax.axhline(1.0, color="black", linestyle="--", linewidth=1)
        for i, sg in enumerate(subgraphs):
            _source_tag(ax, i * 2.6 + 0.5,
                        "GPU counters" if "GPU" in sg.bytes_source else "model")
    else:
        _no_data(ax, f"no labelled subgraphs: no run of experiment '{fd.FIG8_EXPERIMENT}'")
    ax.set_ylabel("Transactions relative\nto layerwise")
    ax.set_title("ours (P = padded, M = memoized)", fontsize=9, loc="left")
    handles = [Patch(facecolor=COLORS[k], edgecolor="black", label=f"{lab} transactions")
               for k, lab in kinds]
    handles.append(plt.Line2D([], [], color="black", linestyle="--", label="layerwise"))
    handles.append(plt.Line2D([], [], marker="D", color="black", linestyle="",
                              label=f"paper's value ({ref.GPU})"))
    _side_legend(ax, handles)
    values = [v for r in rows for t in r.values() for v in t if v > 0]
    if values and max(values) > 3:  # the ratios span decades: a log axis shows them all
        ax.set_yscale("log")
        ax.set_ylim(min(values + [0.5]) / 1.5, max(values) * 1.5)
    else:
        ax.set_ylim(0, max(values + [1.4]) * 1.1)

    paper_rows = [{s: p[s] for s in fd.FUSED} for p in ref.FIG9]
    centers, xs, letters = panel(axp, paper_rows, None)
    _subgraph_axis_labels(axp, centers, xs, letters,
                          [f"Subgraph {i + 1}" for i in range(len(ref.FIG9))])
    axp.axhline(1.0, color="black", linestyle="--", linewidth=1)
    axp.set_ylim(0, 1.6)
    axp.set_ylabel("Transactions relative\nto cuDNN")
    axp.set_title(PAPER_TITLE, fontsize=9, loc="left")
    byte_sources = sorted({sg.bytes_source for sg in subgraphs})
    subtitle = _runs_subtitle([run] if run else [], byte_sources,
                              note="L1 = bytes the kernels issue to global memory, L2 = bytes "
                                   "reaching L2, DRAM = bytes reaching DRAM (read + write); "
                                   "GPU counters: l1tex__t_bytes.sum, lts__t_bytes.sum, "
                                   "dram__bytes_read.sum + dram__bytes_write.sum")
    return _finish(fig, outdir, FIGURES["fig9"],
                   "Fig 9 - ResNet-50 subgraphs: data movement relative to layerwise", subtitle)


# ---- Figs 10 and 11 ------------------------------------------------------------------------

def _absolute_panel(ax, baseline, groups, baseline_label):
    """baseline: {memory, compute} parts or None; groups: [(label, {strategy: parts})]."""
    width = 0.32
    xs, letters, centers, top = [], [], [], 0.0
    if baseline is not None:
        top = max(top, _mc_pair(ax, 0, width, *baseline[:2]))
        if len(baseline) > 2:
            _source_tag(ax, 0, baseline[2])
        xs.append(0)
        letters.append(f"M  C\n{baseline_label}")
        ax.axhline(sum(baseline[0].values()), color="black", linestyle="--", linewidth=1)
    for i, (label, bars) in enumerate(groups):
        base = 1.5 + i * 2.2
        centers.append(base + 0.5)
        for j, s in enumerate(fd.FUSED):
            x = base + j
            xs.append(x)
            letters.append(f"M  C\n{s.capitalize()}")
            if s not in bars:
                continue
            parts = bars[s]
            if isinstance(parts, str):  # no bar: say why
                _missing_tag(ax, x, parts)
                continue
            t = _mc_pair(ax, x, width, parts[0], parts[1])
            if len(parts) > 2:
                _source_tag(ax, x, parts[2])
            top = max(top, t)
    ax.set_xticks(xs, letters, fontsize=7)
    ax.set_xlim(min(xs) - 0.8, max(xs) + 0.8)
    for c, (label, _) in zip(centers, groups):
        ax.text(c, -0.16, label, ha="center", va="top", transform=ax.get_xaxis_transform(),
                fontsize=9, fontweight="bold")
    for c in centers:
        ax.axvline(c - 1.1, color="#bbbbbb", linewidth=0.8)
    ax.set_ylim(0, top * 1.1 if top > 0 else 1)


def _parts(b):
    return (b.memory_side, b.compute_side, b.source)


def _paper_parts(bar):
    return ({k: bar[k] for k in MEMORY_KEYS}, {k: bar[k] for k in COMPUTE_KEYS})


def draw_fig10(data, outdir):
    fig, (ax, axp) = plt.subplots(2, 1, figsize=(12, 9.5))
    if data is None or not data.partitions:
        _no_data(ax, f"no run of experiment '{fd.FIG10_EXPERIMENT}' with partitions in this "
                     "database")
    else:
        groups = [(" + ".join(p.name.split("+")),
                   {**p.missing, **{s: _parts(b) for s, b in p.bars.items()}})
                  for p in data.partitions]
        _absolute_panel(ax, _parts(data.layerwise) if data.layerwise else None, groups,
                        "layerwise")
    ax.set_ylabel("Total execution time (ms)")
    ax.set_title("ours" + (f" (each layer: {data.first_layer})" if data and data.first_layer
                           else ""), fontsize=9, loc="left")
    _breakdown_legend(ax)
    _absolute_panel(axp, _paper_parts(ref.FIG10_CUDNN),
                    [(" + ".join(n.split("+")), {s: _paper_parts(ref.FIG10[n][s])
                                                 for s in fd.FUSED})
                     for n in ref.FIG10_ORDER], "cuDNN")
    axp.set_ylabel("Total execution time (ms)")
    axp.set_title(PAPER_TITLE + ", 112^3 x 3 channels, batch 1", fontsize=9, loc="left")
    run = data.run if data else None
    subtitle = _runs_subtitle([run] if run else [], [data.source] if data else [])
    if data and data.notes:
        subtitle += "\nnotes: " + "; ".join(data.notes)
    return _finish(fig, outdir, FIGURES["fig10"],
                   "Fig 10 - 6-layer 3-D conv chain: partitions x padded / memoized vs "
                   "layerwise", subtitle)


def draw_fig11(data, outdir):
    fig, (ax, axp) = plt.subplots(2, 1, figsize=(12, 9.5))
    if data is None or not data.bricks:
        _no_data(ax, f"no run of experiment '{fd.FIG11_EXPERIMENT}' in this database")
    else:
        groups = []
        for e, bars in sorted(data.bricks.items()):
            parts = {s: _parts(b) for s, b in bars.items()}
            parts.update({s: why for s, why in data.missing.get(e, {}).items()})
            groups.append(("x".join([str(e)] * data.dims) + " brick", parts))
        _absolute_panel(ax, _parts(data.layerwise) if data.layerwise else None, groups,
                        "layerwise")
    ax.set_ylabel("Total execution time (ms)")
    ax.set_title("ours" + (f" (group: {data.group[2]}; each layer: {data.first_layer})"
                           if data and data.group else ""), fontsize=9, loc="left")
    _breakdown_legend(ax)
    _absolute_panel(axp, _paper_parts(ref.FIG11_CUDNN),
                    [(f"{e}x{e}x{e} brick", {s: _paper_parts(ref.FIG11[e][s])
                                             for s in fd.FUSED}) for e in sorted(ref.FIG11)],
                    "cuDNN")
    axp.set_ylabel("Total execution time (ms)")
    axp.set_title(PAPER_TITLE + ", 3-layer chain on 224^3", fontsize=9, loc="left")
    run = data.run if data else None
    subtitle = _runs_subtitle([run] if run else [], [data.source] if data else [])
    if data and data.notes:
        subtitle += "\nnotes: " + "; ".join(data.notes)
    return _finish(fig, outdir, FIGURES["fig11"],
                   "Fig 11 - 3-layer 3-D conv chain: brick size x padded / memoized vs "
                   "layerwise", subtitle)


# ---- Fig 12 ----------------------------------------------------------------------------------

def _stats_text(stats, scale_note=""):
    def f(v, fmt):
        return "n/a" if v is None else format(v, fmt)
    return (f"n = {stats['n']}\nmedian |rel. err| = {f(stats['median_rel_error'], '.1%')}\n"
            f"worst |rel. err| = {f(stats['worst_rel_error'], '.1%')}\n"
            f"Spearman rho = {f(stats['spearman'], '.3f')}{scale_note}")


def fig12_stats(points):
    """{target: {"time": stats, "bytes": stats, "bytes_kind": ...}} for figures.json."""
    out = {}
    for target in sorted({p.target for p in points}):
        pts = [p for p in points if p.target == target]
        bpts = [p for p in pts if p.measured_bytes is not None]
        out[target] = {
            "backend": pts[0].backend,
            "time": fd.accuracy_stats([p.predicted_ms for p in pts],
                                      [p.measured_ms for p in pts]),
            "bytes": fd.accuracy_stats([p.predicted_bytes for p in bpts],
                                       [p.measured_bytes for p in bpts]),
            "bytes_kind": bpts[0].bytes_kind if bpts else None,
        }
    return out


def draw_fig12(points, outdir):
    fig, axes = plt.subplots(1, 2, figsize=(12, 7))
    stats = fig12_stats(points)
    markers = {"padded": "o", "memoized": "s", "layerwise": "^"}
    palette = ["#2e6fbd", "#d00000", "#00a050", "#ff9900", "#7030a0"]
    for ax, key in zip(axes, ("time", "bytes")):
        lo, hi = float("inf"), 0.0
        texts = []
        for ti, target in enumerate(stats):
            color = palette[ti % len(palette)]
            pts = [p for p in points if p.target == target]
            for strat, mk in markers.items():
                sel = [p for p in pts if p.strategy == strat]
                if key == "time":
                    xy = [(p.predicted_ms, p.measured_ms) for p in sel]
                else:
                    xy = [(p.predicted_bytes, p.measured_bytes) for p in sel
                          if p.measured_bytes is not None]
                xy = [(a, b) for a, b in xy if a and b and a > 0 and b > 0]
                if not xy:
                    continue
                ax.scatter([a for a, _ in xy], [b for _, b in xy], s=14, marker=mk,
                           color=color, alpha=0.7, label=f"{target[:48]} · {strat}")
                lo = min([lo] + [v for pair in xy for v in pair])
                hi = max([hi] + [v for pair in xy for v in pair])
            s = stats[target][key]
            if s["n"]:
                note = ""
                if stats[target]["backend"] != "cuda" and key == "time":
                    note = "\n(CPU times vs the GPU model: compare ranks, not values)"
                kind = "" if key == "time" else f" [{stats[target]['bytes_kind']}]"
                texts.append((color, f"{target[:44]}{kind}\n" + _stats_text(s, note)))
        if hi > 0:
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.plot([lo, hi], [lo, hi], color="black", linewidth=0.8, linestyle="--",
                    label="y = x")
            ax.set_xlim(lo / 1.5, hi * 1.5)
            ax.set_ylim(lo / 1.5, hi * 1.5)
            ax.legend(fontsize=6, loc="lower right")
        else:
            _no_data(ax, "no measured candidate with a prediction in this database")
        # Statistics under the axes, one block per target.
        for k, (color, t) in enumerate(texts):
            ax.text(0.0 + 0.5 * (k % 2), -0.14 - 0.2 * (k // 2), t, transform=ax.transAxes,
                    va="top", fontsize=6.5, color=color, family="monospace")
        if key == "time":
            ax.set_xlabel("predicted time (ms)")
            ax.set_ylabel("measured time, median (ms)")
            ax.set_title("time", fontsize=9)
        else:
            ax.set_xlabel("predicted bytes")
            ax.set_ylabel("measured bytes")
            ax.set_title("bytes: GPU = DRAM read + write (counters) vs predicted DRAM;\n"
                         "CPU = loads + stores issued (executor) vs predicted L1", fontsize=8)
    runs_note = ("every candidate with an ok measurement (latest per candidate and target) "
                 "and a prediction for its run's GPU spec;\nrelative error = |predicted - "
                 "measured| / measured; no paper counterpart (beyond the paper)")
    return _finish(fig, outdir, FIGURES["fig12"],
                   "Fig 12 (beyond the paper) - model vs measurement", runs_note, bottom=0.33,
                   right=0.98)


# ---- driver ---------------------------------------------------------------------------------

def _jsonable(obj):
    if isinstance(obj, fd.Breakdown):
        return obj.as_dict()
    if isinstance(obj, fd.CandidateResult):
        return {"candidate_id": obj.id, "config": obj.describe(), "predicted_ms":
                obj.prediction["time_ms"] if obj.prediction else None,
                "measured_ms": obj.measured_ms}
    if isinstance(obj, fd.Run):
        return {"run_id": obj.id, "experiment": obj.experiment, "target": obj.target,
                "gpu_spec": obj.gpu_spec, "batch": obj.batch, "precision": obj.precision,
                "status": obj.status}
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if hasattr(obj, "__dataclass_fields__"):
        return {k: _jsonable(getattr(obj, k)) for k in obj.__dataclass_fields__}
    return obj


def make_figures(db, outdir, target_prefix=None, only=None):
    """Draws the figures; returns ({figure: [paths]}, summary dict)."""
    os.makedirs(outdir, exist_ok=True)
    conn = fd.open_db(db)
    wanted = set(only or FIGURES)
    written, summary = {}, {"database": os.path.basename(db)}
    if "fig7" in wanted:
        data = fd.fig7_data(conn, target_prefix=target_prefix)
        summary["fig7"] = data
        written["fig7"] = draw_fig7(data, outdir)
    if wanted & {"fig8", "fig9"}:
        run = fd.find_run(conn, fd.FIG8_EXPERIMENT, target_prefix)
        subgraphs = fd.subgraph_data(conn, run) if run else []
        summary["fig8_9"] = {"run": run, "subgraphs": subgraphs}
        if "fig8" in wanted:
            written["fig8"] = draw_fig8(run, subgraphs, outdir)
        if "fig9" in wanted:
            written["fig9"] = draw_fig9(run, subgraphs, outdir)
    if "fig10" in wanted:
        data = fd.fig10_data(conn, target_prefix=target_prefix)
        summary["fig10"] = data
        written["fig10"] = draw_fig10(data, outdir)
    if "fig11" in wanted:
        data = fd.fig11_data(conn, target_prefix=target_prefix)
        summary["fig11"] = data
        written["fig11"] = draw_fig11(data, outdir)
    if "fig12" in wanted:
        points = fd.fig12_data(conn, target_prefix)
        summary["fig12"] = {"stats": fig12_stats(points), "points": len(points)}
        written["fig12"] = draw_fig12(points, outdir)
    conn.close()
    with open(os.path.join(outdir, "figures.json"), "w") as f:
        json.dump(_jsonable(summary), f, indent=1, sort_keys=True)
    return written, summary


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="brickdl-figures",
        description="Draw the BrickDL paper's Figs 7-11 and the model-accuracy Fig 12 from a "
                    "brickdl tuning database (PNG and PDF).")
    parser.add_argument("db", help="tuning database (brickdl.db)")
    parser.add_argument("outdir", help="output folder (created if missing)")
    parser.add_argument("--target", default=None,
                        help="only runs whose target fingerprint starts with this, e.g. "
                             "'gpu:' or 'cpu:' (default: the latest run of each experiment)")
    parser.add_argument("--only", default=None,
                        help="comma-separated subset of " + ",".join(FIGURES))
    parser.add_argument("--formats", default="png,pdf",
                        help="comma-separated output formats (default: png,pdf; any that "
                             "matplotlib writes, e.g. svg)")
    args = parser.parse_args(argv)
    FORMATS[:] = [s.strip() for s in args.formats.split(",") if s.strip()]
    if not FORMATS:
        parser.error("--formats needs at least one format")
    only = None
    if args.only:
        only = [s.strip() for s in args.only.split(",") if s.strip()]
        bad = [s for s in only if s not in FIGURES]
        if bad:
            parser.error(f"unknown figure(s) {', '.join(bad)}; valid: {', '.join(FIGURES)}")
    try:
        written, _ = make_figures(args.db, args.outdir, args.target, only)
    except fd.DataError as e:
        print(f"brickdl-figures: {e}", file=sys.stderr)
        return 2
    for name, paths in written.items():
        print(f"{name}: {', '.join(paths)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
