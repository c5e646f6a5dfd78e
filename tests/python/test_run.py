"""brickdl.run against brickdl-run: the same outputs for the same model, seed and plan; numpy
inputs; the check against the reference; errors."""
import numpy as np
import pytest

import brickdl
from conftest import cli


@pytest.fixture(scope="module")
def small():
    return brickdl.Model.zoo("resnet50", batch=1, input_size=[32, 32], num_classes=10)


def test_layer_by_layer_equals_brickdl_run(tmp_path, small):
    r = brickdl.run(small, seed=3)
    assert r.names == ["fc"] and r.output.shape == (1, 10) and r.output.dtype == np.float32
    # brickdl-run --model resnet50 has the zoo's 1000 classes: the same model as an experiment.
    exp = tmp_path / "small.yaml"
    exp.write_text("model: {zoo: resnet50, num_classes: 10}\nbatch: 1\ninput_size: [32, 32]\n"
                   "target: H200\n")
    cli("brickdl-run", "--model", exp, "--seed", 3, "--out", tmp_path / "exp", "--quiet")
    np.testing.assert_array_equal(r.output, np.load(tmp_path / "exp" / "output.npy"))
    x = np.load(tmp_path / "exp" / "input.npy")
    np.testing.assert_array_equal(brickdl.run(small, inputs=x, seed=3).output, r.output)


def test_a_tuned_plan_runs_and_matches_the_reference(tmp_path, small):
    plan = brickdl.tune(small, backend="none", db=str(tmp_path / "t.db"), out=tmp_path / "out",
                        brick_sizes=[4, 8])
    merged = sum(g.strategy != "layerwise" for g in plan.groups)
    assert merged > 0
    x = np.random.default_rng(0).uniform(-1, 1, (1, 3, 32, 32)).astype(np.float32)
    r = brickdl.run(small, plan, inputs={"input": x}, check=True, threads=2)
    assert r.groups == len(plan.groups) and r.passed
    assert r.checks[0]["max_rel_error"] < 1e-4 and r.reference_ms > 0
    np.save(tmp_path / "x.npy", x)
    exp = tmp_path / "small.yaml"
    exp.write_text("model: {zoo: resnet50, num_classes: 10}\nbatch: 1\ninput_size: [32, 32]\n"
                   "target: H200\n")
    cli("brickdl-run", "--model", exp, "--plan", tmp_path / "out" / "plan.json", "--input",
        tmp_path / "x.npy", "--threads", 2, "--out", tmp_path / "cli", "--quiet")
    np.testing.assert_array_equal(r.output, np.load(tmp_path / "cli" / "output.npy"))
    layerwise = brickdl.run(small, inputs=[x])
    np.testing.assert_allclose(r.output, layerwise.output, rtol=1e-4,
                               atol=1e-4 * np.abs(layerwise.output).max())


def test_a_plan_is_run_at_its_batch_and_refused_for_another_model(tmp_path, small):
    plan = brickdl.tune(small, backend="none", db=str(tmp_path / "t.db"), batch=2)
    r = brickdl.run(small, plan)
    assert r.output.shape == (2, 10)
    other = brickdl.Model.zoo("resnet50", batch=2, input_size=[64, 64], num_classes=10)
    with pytest.raises(brickdl.UserError, match="does not fit this run"):
        brickdl.run(other, plan)


def test_bad_inputs_name_the_input(small):
    with pytest.raises(brickdl.UserError, match=r"input 'input'.*array of shape 1x3x16x16, "
                                                r"expected 1x3x32x32"):
        brickdl.run(small, inputs=np.zeros((1, 3, 16, 16), np.float32))
    with pytest.raises(brickdl.UserError, match="no input 'x'; the model's inputs: input"):
        brickdl.run(small, inputs={"x": np.zeros((1, 3, 32, 32))})
    with pytest.raises(brickdl.UserError, match="2 array"):
        brickdl.run(small, inputs=[np.zeros((1, 3, 32, 32))] * 2)
    with pytest.raises(brickdl.UserError, match="backend='cuda'"):
        brickdl.run(small, backend="cuda")


def test_an_onnx_model_runs_with_its_own_weights(tmp_path):
    onnx = tmp_path / "m.onnx"
    cli("brickdl-run", "--model", "micro_graphsize", "--input-size", "8,8,8", "--export-onnx",
        onnx, "--seed", 5, "--out", tmp_path / "ref", "--quiet")
    m = brickdl.Model.onnx(onnx)
    x = np.load(tmp_path / "ref" / "input.npy")
    # The exported weights are brickdl-run's seed-5 weights: the same output at any seed.
    r = brickdl.run(m, inputs=x, seed=99, check=True)
    np.testing.assert_allclose(r.output, np.load(tmp_path / "ref" / "output.npy"), rtol=1e-5,
                               atol=1e-6)


def test_a_failed_check_raises_check_error_with_the_result(small, monkeypatch):
    # The executor agrees with the reference here; the package's reaction to a failed check is
    # tested on the C++ call's answer with one output marked failed.
    real = brickdl._brickdl.run

    def failing(*args):
        r = real(*args)
        r["check"][0].update(passed=False, message="1 of 10 output elements differ")
        return r

    monkeypatch.setattr(brickdl._brickdl, "run", failing)
    with pytest.raises(brickdl.CheckError, match="output 'fc': 1 of 10 output elements") as e:
        brickdl.run(small, check=True)
    assert e.value.result.passed is False and e.value.result.output.shape == (1, 10)
