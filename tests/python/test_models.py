"""brickdl.Model: the zoo, ONNX files, experiment files, settings, describe, and their errors
against the command-line programs' (same message after 'error:')."""
import ast
import os

import pytest

import brickdl
from conftest import cli, cli_error, source


def test_zoo_model_has_the_zoo_defaults():
    m = brickdl.Model.zoo("resnet50", batch=8)
    assert (m.name, m.model, m.kind, m.batch, m.precision, m.target) == (
        "resnet50", "resnet50", "zoo", 8, "fp32", "H200")
    assert m.inputs == {"input": [8, 3, 224, 224]}
    assert "resnet50" in brickdl.zoo_names() and "efficientnet_b0" in brickdl.zoo_names()


def test_zoo_options_reach_the_graph():
    m = brickdl.Model.zoo("resnet50", batch=2, input_size=[64, 96], num_classes=10)
    layers = m.describe(as_frame=False)
    assert layers[0]["shape"] == [2, 3, 64, 96]
    assert layers[-1]["shape"] == [2, 10]


def test_describe_matches_the_clis_describe(tmp_path):
    path = source("experiments", "minimal.yaml")
    m = brickdl.Model.experiment(path)
    assert m.describe_text() == cli("brickdl-tune", path, "--describe").stdout
    rows = m.describe()
    total = [ln for ln in m.describe_text().splitlines() if ln.startswith("total: ")][0]
    # "total: 173 layers, 25,557,032 params, 4,089,184,256 MACs (...)"
    layers, params, macs = (int(x.split()[0].replace(",", ""))
                            for x in total[len("total: "):].split(", ")[:3])
    assert len(rows) - 1 == layers  # the input is a row, not a layer
    assert int(rows["params"].sum()) == params and int(rows["macs"].sum()) == macs
    fused = m.describe(fused=True)
    assert len(fused) < len(rows) and int(fused["macs"].sum()) == macs
    assert {"conv", "linear", "add"} <= set(rows["op"])


def test_describe_without_pandas_gives_dicts():
    rows = brickdl.Model.zoo("micro_graphsize").describe(as_frame=False)
    assert isinstance(rows, list) and set(rows[1]) == {
        "id", "name", "op", "attributes", "inputs", "shape", "params", "macs", "out_bytes"}


def test_onnx_model_takes_the_files_batch_and_name(tmp_path):
    onnx = tmp_path / "chain.onnx"
    cli("brickdl-run", "--model", "micro_graphsize", "--batch", "2", "--export-onnx", onnx)
    m = brickdl.Model.onnx(onnx)
    assert (m.name, m.kind, m.batch) == ("chain", "onnx", 2)
    assert brickdl.Model.onnx(onnx, batch=2).batch == 2


def test_with_settings_applies_flags_and_section_keys():
    m = brickdl.Model.zoo("resnet50").with_settings(target="A100-40GB", precision="bf16",
                                                    batch=4, backend="none", db="x.db")
    assert (m.target, m.precision, m.batch, m.backend, m.database) == (
        "A100-40GB", "bf16", 4, "none", "x.db")


def test_an_unknown_zoo_model_is_a_user_error_with_a_suggestion():
    with pytest.raises(brickdl.UserError, match="unknown zoo model 'resnet5'.*did you mean "
                                                "'resnet50'"):
        brickdl.Model.zoo("resnet5")


def test_a_bad_experiment_file_names_file_line_and_key_as_the_cli(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("model: resnet50\ntarget: H200\nsearch:\n  brick_sizes: [3]\n")
    with pytest.raises(brickdl.UserError) as e:
        brickdl.Model.experiment(bad)
    assert str(e.value) == cli_error("brickdl-tune", bad)
    assert (e.value.file, e.value.line, e.value.key) == (str(bad), 4, "search.brick_sizes[0]")
    assert isinstance(e.value, ValueError) and not isinstance(e.value, brickdl.InternalError)


def test_a_missing_onnx_file_is_the_clis_error(tmp_path):
    missing = tmp_path / "missing.onnx"
    with pytest.raises(brickdl.UserError) as e:
        brickdl.Model.onnx(missing)
    assert str(e.value) == cli_error("brickdl-tune", missing)


def test_relative_paths_with_folders_from_the_folder_above(in_tmp):
    """Model.onnx takes a path relative to the working directory, Model.experiment too; a path
    inside an experiment is relative to the experiment's folder (as brickdl-tune reads them)."""
    for folder in ("models", "experiments"):
        (in_tmp / folder).mkdir()
    cli("brickdl-run", "--model", "micro_graphsize", "--batch", "2", "--input-size", "12,12,12",
        "--export-onnx", "models/chain.onnx", cwd=in_tmp)
    (in_tmp / "models" / "exp.yaml").write_text("model: chain.onnx\ntarget: H200\n")
    (in_tmp / "experiments" / "up.yaml").write_text("model: ../models/chain.onnx\ntarget: H200\n")
    m = brickdl.Model.onnx("models/chain.onnx")
    assert (m.name, m.kind, m.batch) == ("chain", "onnx", 2)
    assert m.with_settings(backend="none").backend == "none"  # parsed again: the same path
    layers = len(m.describe(as_frame=False))
    for path in ("models/exp.yaml", "experiments/up.yaml"):
        e = brickdl.Model.experiment(path)
        assert (e.kind, e.batch, len(e.describe(as_frame=False))) == ("experiment", 2, layers)
        assert e.with_settings(top_k=2).batch == 2, path
    brickdl.tune(m, backend="none", db="brickdl.db", out="out/chain")
    assert os.path.exists("out/chain/plan.json")


def test_a_missing_relative_model_is_the_clis_error(in_tmp):
    (in_tmp / "experiments").mkdir()
    (in_tmp / "experiments" / "exp.yaml").write_text("model: chain.onnx\ntarget: H200\n")
    with pytest.raises(brickdl.UserError) as e:
        brickdl.Model.onnx("models/chain.onnx")
    assert str(e.value) == cli_error("brickdl-tune", "models/chain.onnx", cwd=in_tmp)
    assert str(e.value) == "models/chain.onnx: cannot open the file"
    with pytest.raises(brickdl.UserError) as e:
        brickdl.Model.experiment("experiments/exp.yaml")
    assert str(e.value) == cli_error("brickdl-tune", "experiments/exp.yaml", cwd=in_tmp)
    assert "experiments/chain.onnx: cannot open the file ('chain.onnx' is relative to the " \
           "experiment file's folder, experiments)" in str(e.value)


def test_bad_settings_name_the_keyword():
    m = brickdl.Model.zoo("resnet50")
    with pytest.raises(brickdl.UserError, match=r"^brickdl.tune\(\): key 'top_k': ") as e:
        m.with_settings(top_k=0)
    assert (e.value.file, e.value.key, e.value.line) == ("brickdl.tune()", "top_k", None)
    with pytest.raises(brickdl.UserError, match=r"unknown setting 'brick_size' \(did you mean "
                                                r"'brick_sizes'\?\)"):
        m.with_settings(brick_size=[8])
    with pytest.raises(brickdl.UserError, match=r"^brickdl.tune\(\): key 'backend': unknown "
                                                r"backend 'gpu'"):
        m.with_settings(backend="gpu")
    with pytest.raises(brickdl.UserError, match=r"^brickdl.tune\(\): key 'target': unknown GPU "
                                                r"'H100x'"):
        m.with_settings(target="H100x")
    with pytest.raises(brickdl.UserError, match=r"key 'brick_sizes\[0\]'|key 'brick_sizes'"):
        m.with_settings(brick_sizes=[3])


def test_every_public_name_has_a_docstring():
    names = list(brickdl.__all__)
    for name in names:
        obj = getattr(brickdl, name)
        assert obj.__doc__ and obj.__doc__.strip(), name
        for attr, member in vars(obj).items() if isinstance(obj, type) else ():
            if attr.startswith("_") or not (callable(member) or isinstance(member, property)):
                continue
            assert member.__doc__ and member.__doc__.strip(), f"{name}.{attr}"


def test_the_extension_module_has_a_type_stub():
    stub = os.path.join(os.path.dirname(brickdl._brickdl.__file__), "_brickdl.pyi")
    tree = ast.parse(open(stub, encoding="utf-8").read())
    defined = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    assert {"tune", "run", "merge", "zoo_model", "onnx_model", "experiment_model", "Database",
            "Experiment", "TuneResult"} <= defined
    assert os.path.exists(os.path.join(os.path.dirname(brickdl.__file__), "py.typed"))
