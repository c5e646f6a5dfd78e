#!/usr/bin/python3
"""Writes a copy of an experiment YAML file with some keys set, keeping everything else (and
the comments) as it was. scripts/reproduce.sh uses it to run the microbenchmarks at a reduced
size on a machine without a GPU.

    reduce_experiment.py IN.yaml OUT.yaml KEY=VALUE [KEY=VALUE ...]

KEY is a top-level key (`input_size`) or one level deep (`measurement.repetitions`); VALUE is
written as given (YAML flow syntax, e.g. `[64, 64, 64]`). A key that is absent is added.
Only the block layout of brickdl's experiment files is understood (2-space indented
mappings under top-level keys), which is all this needs; no YAML package is required.
"""
import re
import sys

_TOP = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\s*:(.*)$")


def _blocks(lines):
    """[(key or None, start, end)] of top-level entries; end is exclusive."""
    starts = [(m.group(1), i) for i, line in enumerate(lines) for m in [_TOP.match(line)] if m]
    out = []
    for n, (key, start) in enumerate(starts):
        end = starts[n + 1][1] if n + 1 < len(starts) else len(lines)
        # Trailing comments and blank lines belong to the next entry.
        while end - 1 > start and (not lines[end - 1].strip()
                                   or lines[end - 1].lstrip().startswith("#")):
            end -= 1
        out.append((key, start, end))
    return out


def set_key(text, dotted, value):
    """`text` with `dotted` (e.g. 'measurement.repetitions') set to the YAML text `value`."""
    lines = text.splitlines()
    parts = dotted.split(".")
    if len(parts) > 2 or not all(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", p) for p in parts):
        raise ValueError(f"key '{dotted}': expected KEY or KEY.SUBKEY")
    blocks = {key: (start, end) for key, start, end in _blocks(lines)}
    top = parts[0]
    if len(parts) == 1:
        if top in blocks:
            start, end = blocks[top]
            lines[start:end] = [f"{top}: {value}"]
        else:
            lines.append(f"{top}: {value}")
        return "\n".join(lines) + "\n"
    sub = parts[1]
    if top not in blocks:
        lines += [f"{top}:", f"  {sub}: {value}"]
        return "\n".join(lines) + "\n"
    start, end = blocks[top]
    if _TOP.match(lines[start]).group(2).split("#")[0].strip():
        raise ValueError(f"key '{top}' is written on one line; cannot set '{dotted}' in it")
    child = re.compile(r"^(\s+)" + re.escape(sub) + r"\s*:")
    indent = "  "
    for i in range(start + 1, end):
        m = child.match(lines[i])
        if m:
            indent = m.group(1)
            # Replace the entry and any more-indented continuation lines below it.
            j = i + 1
            while j < end and (not lines[j].strip() or
                               len(lines[j]) - len(lines[j].lstrip()) > len(indent)):
                j += 1
            lines[i:j] = [f"{indent}{sub}: {value}"]
            return "\n".join(lines) + "\n"
        if lines[i].strip() and not lines[i].lstrip().startswith("#"):
            indent = lines[i][:len(lines[i]) - len(lines[i].lstrip())]
    lines.insert(end, f"{indent}{sub}: {value}")
    return "\n".join(lines) + "\n"


def main(argv):
    if len(argv) < 3:
        print(__doc__.strip().splitlines()[3].strip(), file=sys.stderr)
        return 2
    src, dst, assignments = argv[0], argv[1], argv[2:]
    with open(src) as f:
        text = f.read()
    for a in assignments:
        key, sep, value = a.partition("=")
        if not sep:
            print(f"reduce_experiment.py: '{a}' is not KEY=VALUE", file=sys.stderr)
            return 2
        try:
            text = set_key(text, key.strip(), value.strip())
        except ValueError as e:
            print(f"reduce_experiment.py: {src}: {e}", file=sys.stderr)
            return 2
    with open(dst, "w") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
