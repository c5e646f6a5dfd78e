"""brickdl.Database against brickdl-query: the same rows through the same C++ store, its
refusals of damaged and foreign files, read-only opening, and merging."""
import hashlib
import io
import json
import sqlite3

import pandas as pd
import pytest

import brickdl
from conftest import cli, cli_error, source


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    """A database with a measured CPU run (the chain, every candidate) and a model-only run."""
    d = tmp_path_factory.mktemp("db")
    from conftest import CHAIN_YAML
    (d / "chain.yaml").write_text(CHAIN_YAML)
    db = d / "t.db"
    brickdl.tune(brickdl.Model.experiment(d / "chain.yaml"), db=db)
    brickdl.tune(brickdl.Model.zoo("resnet50", batch=8), target="H200", precision="tf32",
                 backend="none", db=db)
    return db


def csv_frame(text):
    return pd.read_csv(io.StringIO(text), keep_default_na=False, na_values=[""])


def missing(x):
    """NULL as a DataFrame or a CSV holds it; the CSV writes an empty text as NULL is written."""
    return x is None or x != x or x == ""


def same(frame, expected):
    """Equal column for column (floats exactly; NULL where the other has NULL)."""
    assert list(frame.columns) == list(expected.columns)
    assert len(frame) == len(expected)
    for c in frame.columns:
        a, b = frame[c].tolist(), expected[c].tolist()
        for x, y in zip(a, b):
            if missing(x) and missing(y):
                continue
            assert x == y, (c, x, y)


def test_runs(tuned):
    db = brickdl.Database(tuned)
    assert db.path == str(tuned)
    with open(source("core", "store", "schema.sql"), encoding="utf-8") as f:
        assert f"('schema_version', '{db.schema_version}')" in f.read()
    runs = db.runs()
    assert list(runs["id"]) == [1, 2]
    assert list(runs["kind"]) == ["measured (CPU)", "model only"]
    assert list(runs["status"]) == ["complete", "complete"]
    text = cli("brickdl-query", "runs", "--db", tuned).stdout
    for _, r in runs.iterrows():
        assert f"{r['experiment']}" in text and r["target"] in text


def test_measurements_equal_the_csv_export(tuned):
    db = brickdl.Database(tuned)
    same(db.measurements(), csv_frame(cli("brickdl-query", "export", "--db", tuned,
                                          "--format", "csv").stdout))
    one = db.measurements(run=1, samples=True)
    assert len(one) == len(db.measurements()) and all(len(s) == 3 for s in one["samples_ms"])
    assert db.measurements(run=2).empty


def test_predictions_equal_the_csv_export(tuned):
    db = brickdl.Database(tuned)
    for run in (1, 2):
        same(db.predictions(run=run), csv_frame(cli("brickdl-query", "predictions", "--db",
                                                    tuned, "--run", run).stdout))
    with sqlite3.connect(tuned) as c:
        gpu = c.execute("SELECT gpu_spec FROM runs WHERE id = 2").fetchone()[0]
    p = db.predictions(run=2)
    assert set(p["gpu_spec"]) == {gpu} and set(p["run"]) == {2}


def test_best_equals_brickdl_query_best_json(tuned):
    db = brickdl.Database(tuned)
    expected = json.loads(cli("brickdl-query", "best", "--db", tuned, "--json").stdout)
    rows = brickdl.Database(tuned, as_frame=False).best()
    assert rows == expected
    h200 = brickdl.Database(tuned, as_frame=False).best(
        model="resnet50", gpu="H200", precision="tf32", layer="layer3.0.conv2")
    assert h200 and all(r["source"].startswith("predicted") for r in h200)
    assert h200 == json.loads(cli("brickdl-query", "best", "--db", tuned, "--json", "--model",
                                  "resnet50", "--gpu", "H200", "--precision", "tf32", "--layer",
                                  "layer3.0.conv2").stdout)
    with pytest.raises(brickdl.UserError, match="valid: measured, predicted"):
        db.best(source="guessed")


def test_show_and_accuracy(tuned):
    db = brickdl.Database(tuned)
    assert db.show(1) == cli("brickdl-query", "show", "1", "--db", tuned).stdout
    sets = db.accuracy()
    assert len(sets) == 1 and sets[0]["target"].startswith("cpu:")
    with pytest.raises(brickdl.UserError) as e:
        db.show(99)
    assert str(e.value) == cli_error("brickdl-query", "show", "99", "--db", tuned)


def test_reading_never_writes(tuned):
    before = hashlib.sha256(tuned.read_bytes()).hexdigest()
    db = brickdl.Database(tuned)
    db.runs(), db.best(), db.measurements(), db.predictions(), db.show(1)
    assert hashlib.sha256(tuned.read_bytes()).hexdigest() == before


@pytest.mark.parametrize("content", [b"garbage" * 200, None, "foreign"])
def test_damaged_missing_and_foreign_files_are_the_clis_errors(tmp_path, content):
    path = tmp_path / "x.db"
    if content == "foreign":
        with sqlite3.connect(path) as c:
            c.execute("CREATE TABLE t (x)")
    elif content is not None:
        path.write_bytes(content)
    with pytest.raises(brickdl.UserError) as e:
        brickdl.Database(path)
    assert str(e.value) == cli_error("brickdl-query", "runs", "--db", path)


def test_merge_adds_each_input_once_as_the_cli(tuned, tmp_path):
    out = tmp_path / "m.db"
    stats = brickdl.merge(out, tuned)
    assert stats[0]["runs_added"] == 2 and stats[0]["measurements_added"] > 0
    again = brickdl.Database(out).merge(tuned)
    assert again[0]["runs_added"] == 0 and again[0]["runs_present"] == 2
    cli("brickdl-query", "merge", tmp_path / "cli.db", tuned)
    same(brickdl.Database(out).measurements(), brickdl.Database(tmp_path / "cli.db").measurements())
    with pytest.raises(brickdl.UserError) as e:
        brickdl.merge(out, tmp_path / "missing.db")
    assert str(e.value) == cli_error("brickdl-query", "merge", out, tmp_path / "missing.db")


def test_without_pandas_tables_are_lists_of_dicts(tuned):
    db = brickdl.Database(tuned, as_frame=False)
    runs = db.runs()
    assert isinstance(runs, list) and runs[0]["id"] == 1 and runs[1]["kind"] == "model only"
    assert isinstance(db.measurements(), list) and "median_ms" in db.measurements()[0]
