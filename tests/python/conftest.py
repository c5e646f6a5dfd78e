"""Fixtures of the Python package's tests (run by ctest: tests/python/CMakeLists.txt).

ctest sets BRICKDL_BIN (the build tree's apps/ folder, where brickdl-tune, brickdl-run and
brickdl-query are) and BRICKDL_SOURCE_DIR (the checkout); PYTHONPATH points at the build tree's
package unless a test means the installed one.

ctest runs each test file as one test and reports exit status 77 as Skipped (SKIP_RETURN_CODE):
a run with no failure in which some test was skipped exits 77, so that ctest's skip count holds
every skip and Passed means that every test of the file ran. (A file where some tests ran and one
skipped reads Skipped too: its summary line says how many passed.)
"""
import json
import os
import subprocess

import pytest

import brickdl

SOURCE = os.environ.get("BRICKDL_SOURCE_DIR",
                        os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "..")))
BIN = os.path.abspath(os.environ.get("BRICKDL_BIN", os.path.join(SOURCE, "build", "apps")))

SKIP_EXIT = 77
_skipped = []  # node ids of the skipped tests (and modules skipped at collection)


def pytest_collectreport(report):
    if report.skipped:
        _skipped.append(report.nodeid)


def pytest_runtest_logreport(report):
    # An xfail is reported skipped with wasxfail set: it ran, so it is no skip here.
    if report.skipped and not hasattr(report, "wasxfail"):
        _skipped.append(report.nodeid)


def pytest_sessionfinish(session, exitstatus):
    if exitstatus == pytest.ExitCode.OK and _skipped:
        session.exitstatus = SKIP_EXIT


def pytest_terminal_summary(terminalreporter, exitstatus):
    if exitstatus == pytest.ExitCode.OK and _skipped:
        terminalreporter.write_line(f"{len(_skipped)} skipped, none failed: exit status "
                                    f"{SKIP_EXIT} (ctest: Skipped)")


# A three-conv 3-D chain small enough to measure every candidate on the CPU in seconds.
CHAIN_YAML = """name: chain
model: {zoo: conv_chain, depth: 3, channels: 4, kernel: 3, image: 12, dims: 3}
batch: 1
target: {gpu: A100-40GB}
search:
  brick_sizes: [4, 8]
  max_group_len: 3
  searcher: measure_all
measurement:
  backend: cpu
  warmup: 1
  repetitions: 3
  cpu_threads: 1
"""


def source(*parts):
    """A path in the checkout."""
    return os.path.join(SOURCE, *parts)


def cli(program, *args, check=True, cwd=None):
    """Runs a brickdl program of the build tree; the CompletedProcess (text)."""
    r = subprocess.run([os.path.join(BIN, program), *map(str, args)], capture_output=True,
                       text=True, cwd=cwd, timeout=600)
    if check and r.returncode != 0:
        raise AssertionError(f"{program} {' '.join(map(str, args))}: exit {r.returncode}\n"
                             f"{r.stderr}")
    return r


def cli_error(program, *args, cwd=None):
    """The message a program printed after 'PROGRAM: error: ' (exit 2 expected)."""
    r = cli(program, *args, check=False, cwd=cwd)
    assert r.returncode == 2, (r.returncode, r.stderr)
    prefix = f"{program}: error: "
    line = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else ""
    text = r.stderr[r.stderr.index(prefix) + len(prefix):].rstrip("\n")
    assert text, line
    return text


# Keys of plan.json that differ between two runs of the same experiment by nature (time).
VOLATILE = {"seconds", "measure_s", "model_seconds"}


def stable(value):
    """plan.json without its wall times (any key holding 'seconds')."""
    if isinstance(value, dict):
        return {k: stable(v) for k, v in value.items()
                if k not in VOLATILE and "seconds" not in k}
    if isinstance(value, list):
        return [stable(v) for v in value]
    return value


def read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    """Runs the test in a fresh folder (brickdl.db and out/ land there)."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def chain_experiment(tmp_path):
    path = tmp_path / "chain.yaml"
    path.write_text(CHAIN_YAML)
    return path


__all__ = ["brickdl", "cli", "cli_error", "source", "stable", "read_json", "CHAIN_YAML"]
