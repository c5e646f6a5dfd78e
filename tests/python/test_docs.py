"""docs/python.md's worked example runs: every ```python block in order, in one namespace, in a
fresh folder; a ```text block right after one is what that block must print."""
import contextlib
import io
import os
import re

from conftest import source

BLOCK = re.compile(r"```(\w+)\n(.*?)```", re.S)


def test_the_worked_example_runs_and_prints_what_the_page_shows(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    text = open(source("docs", "python.md"), encoding="utf-8").read()
    blocks = BLOCK.findall(text)
    namespace = {}
    ran = 0
    for k, (kind, code) in enumerate(blocks):
        if kind != "python":
            continue
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code, f"docs/python.md block {k}", "exec"), namespace)
        ran += 1
        if k + 1 < len(blocks) and blocks[k + 1][0] == "text":
            assert out.getvalue() == blocks[k + 1][1], f"block {k} printed:\n{out.getvalue()}"
    assert ran >= 5
    assert os.path.getsize(tmp_path / "speedup_per_group.png") > 10000
