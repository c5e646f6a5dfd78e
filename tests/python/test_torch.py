"""brickdl.torch: a PyTorch module tuned and run. Needs torch in this interpreter; CI's .venv
has none (PyTorch is a large download the project does not install), so there the module tests
are skipped with that reason, and the ONNX path they go through (Model.onnx of an exported file,
its weights, tune and run) is tested by test_models.py and test_run.py. Set
BRICKDL_TORCH_PYTHON to an interpreter with torch (and numpy, onnx) to run them in it."""
import os
import subprocess
import sys
import textwrap

import pytest

import brickdl

TORCH_PYTHON = os.environ.get("BRICKDL_TORCH_PYTHON", "")

MODULE_TEST = textwrap.dedent("""
    import sys
    sys.path.insert(0, sys.argv[1])   # the package under test (the interpreter is torch's)
    import math
    import numpy as np, torch, brickdl, brickdl.torch
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.BatchNorm2d(16), torch.nn.ReLU(),
        torch.nn.Conv2d(16, 16, 3, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(16, 8, 1)).eval()
    with torch.no_grad():
        net[1].running_mean.uniform_(-0.5, 0.5); net[1].running_var.uniform_(0.5, 2)
    x = torch.rand(2, 3, 24, 24) * 2 - 1
    model = brickdl.torch.from_module(net, x)
    assert (model.kind, model.batch) == ("onnx", 2), model
    plan = brickdl.tune(model, target="H200", precision="fp32", backend="none",
                       db=sys.argv[2], brick_sizes=[8])
    merged = [g for g in plan.groups if g.strategy != "layerwise"]
    # The speedup is the model's (backend none: nothing is timed), layerwise / plan summed over
    # the groups. The dp searcher is exact under that model and the all-layerwise tiling is one
    # of those it compares, so the plan is never predicted slower than it.
    layerwise = sum(g.layerwise_predicted_ms for g in plan.groups)
    predicted = sum(g.predicted_ms for g in plan.groups)
    assert math.isfinite(plan.speedup) and plan.speedup > 0, plan.speedup
    assert math.isclose(plan.speedup, layerwise / predicted, rel_tol=1e-9), (
        plan.speedup, layerwise, predicted)
    assert plan.speedup >= 1 - 1e-9, (plan.speedup, layerwise, predicted)
    r = brickdl.run(model, plan, inputs=x.numpy(), check=True)
    with torch.no_grad():
        want = net(x).numpy()
    err = float(np.abs(r.output - want).max() / np.abs(want).max())
    print(len(plan.groups), len(merged), f"{plan.speedup:.3f}", f"{err:.2e}")
    assert err < 1e-4, err
""")


def test_brickdl_torch_without_torch_is_one_clear_import_error():
    code = ("import sys; sys.modules['torch'] = None\n"
            "try:\n    import brickdl.torch\nexcept ImportError as e:\n    print(e)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       env={**os.environ})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == ("brickdl.torch needs PyTorch (pip install torch); "
                                "brickdl.Model.onnx takes a model exported elsewhere")


def torch_python():
    """An interpreter with torch: this one, or BRICKDL_TORCH_PYTHON; None when neither."""
    try:
        import torch  # noqa: F401
        return sys.executable
    except ImportError:
        pass
    if TORCH_PYTHON and subprocess.run([TORCH_PYTHON, "-c", "import torch, numpy, onnx"],
                                       capture_output=True).returncode == 0:
        return TORCH_PYTHON
    return None


def test_a_torch_module_is_tuned_and_run_matching_torch(tmp_path):
    python = torch_python()
    if python is None:
        pytest.skip("torch is not installed in this interpreter and BRICKDL_TORCH_PYTHON names "
                    "none with torch: brickdl.torch.from_module is not tested here (the ONNX "
                    "path it uses is: test_models.py, test_run.py)")
    package = os.path.dirname(os.path.dirname(brickdl.__file__))
    r = subprocess.run([python, "-c", MODULE_TEST, package, str(tmp_path / "t.db")],
                       capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    groups, merged, speedup, err = r.stdout.split()
    assert int(merged) >= 1, r.stdout
