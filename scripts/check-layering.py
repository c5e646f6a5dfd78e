#!/usr/bin/env python3
"""Checks the module layering of brickdl's C++ sources and that no include cycle exists.

  apps, python ──► distributed ──► search ──► model ───► core
                             │  └──► kernels ─► core
                             └─────► store ───► core

A file may include (with "module/...") only headers of its own module and of the modules
below it; tests/ and benchmarks/ may include anything. Exit 0: layered and acyclic; 1: the
offending includes or the cycle are printed; 77: not a git checkout (skipped).
"""
import re
import subprocess
import sys

# Module of a path, most specific prefix first.
MODULES = [("core/store/", "store"), ("core/", "core"), ("model/", "model"),
           ("kernels/", "kernels"), ("search/", "search"), ("distributed/", "distributed"),
           ("apps/", "apps"), ("python/", "python"), ("tests/", "tests"), ("benchmarks/", "benchmarks")]
ALLOWED = {
    "core": {"core"},
    "store": {"store", "core"},
    "model": {"model", "core"},
    "kernels": {"kernels", "core"},
    "search": {"search", "store", "model", "kernels", "core"},
    "distributed": {"distributed", "search", "store", "model", "kernels", "core"},
    "apps": {"apps", "distributed", "search", "store", "model", "kernels", "core"},
    "python": {"python", "distributed", "search", "store", "model", "kernels", "core"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def module(path):
    for prefix, name in MODULES:
        if path.startswith(prefix):
            return name
    return None


def main():
    try:
        files = subprocess.check_output(["git", "ls-files", "*.h", "*.cpp", "*.cu", "*.cuh"],
                                        text=True, stderr=subprocess.DEVNULL).split()
    except (OSError, subprocess.CalledProcessError):
        print("check-layering: not a git checkout; skipped")
        return 77
    known = set(files)
    graph, bad = {}, []
    for f in files:
        text = open(f, encoding="utf-8").read()
        deps = [d for d in INCLUDE.findall(text) if d in known]
        graph[f] = deps
        m = module(f)
        if m not in ALLOWED:
            continue
        for d in deps:
            if module(d) not in ALLOWED[m]:
                bad.append(f"{f} ({m}) includes {d} ({module(d)})")
    # Include cycles: depth-first search over the file graph.
    state, stack, cycle = {}, [], []

    def visit(f):
        state[f] = 1
        stack.append(f)
        for d in graph.get(f, []):
            if state.get(d) == 1:
                cycle.extend(stack[stack.index(d):] + [d])
                return True
            if d not in state and visit(d):
                return True
        state[f] = 2
        stack.pop()
        return False

    for f in files:
        if f not in state and visit(f):
            break
    if bad or cycle:
        for b in bad:
            print("check-layering: " + b)
        if cycle:
            print("check-layering: include cycle: " + " -> ".join(cycle))
        return 1
    print(f"check-layering: {len(files)} files; every include goes down the layers, no cycle")
    return 0


if __name__ == "__main__":
    sys.exit(main())
