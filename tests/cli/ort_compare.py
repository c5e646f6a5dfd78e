"""ONNX Runtime on a file brickdl-run --export-onnx wrote, against brickdl-run's own output.

    ort_compare.py MODEL.onnx RUN_DIR TOLERANCE

RUN_DIR is a brickdl-run --out folder: its manifest.json names the input and output arrays
(input.npy, output.npy, or one file per name for a model of several). ORT loads the file (with
its full shape inference, which refuses e.g. a Gemm of a rank-4 input), runs it on the same
inputs, and each output must have brickdl's shape and be within TOLERANCE normwise:
max |ort - brickdl| / max |brickdl| over the whole output (the measure of
tests/onnx/suite_test.cpp: outputs near zero from cancellation do not blow it up). An output
that is all zero is refused: the check could not fail.

Exit status: 0 every output matches; 1 ORT refuses the file or an output differs (printed);
77 onnxruntime or numpy is not installed (the caller reports the check skipped;
scripts/install-deps.sh installs the pinned onnxruntime of scripts/requirements.txt).
Used by tests/cli/onnx_roundtrip_test.cpp.
"""

import json
import os
import sys

try:
    import numpy as np
    import onnxruntime as ort
except ImportError as e:
    print(f"ort_compare: skipped: {e} (scripts/install-deps.sh installs onnxruntime into .venv)")
    sys.exit(77)


def feeds(session, run_dir, manifest):
    """The arrays brickdl-run read, by the file's input names (one input: whatever its name)."""
    inputs = session.get_inputs()
    given = manifest["inputs"]
    if len(inputs) == 1 and len(given) == 1:
        return {inputs[0].name: np.load(os.path.join(run_dir, given[0]["file"]))}
    by_name = {g["name"]: g["file"] for g in given}
    missing = [i.name for i in inputs if i.name not in by_name]
    if missing:
        raise SystemExit(f"ort_compare: the file's inputs {missing} are not in {sorted(by_name)}")
    return {i.name: np.load(os.path.join(run_dir, by_name[i.name])) for i in inputs}


def compare(model, run_dir, tolerance):
    with open(os.path.join(run_dir, "manifest.json")) as f:
        manifest = json.load(f)
    try:
        session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
        got = session.run(None, feeds(session, run_dir, manifest))
    except Exception as e:  # ORT's own exceptions have no common public base
        print(f"ort_compare: ONNX Runtime {ort.__version__} refuses {model}: {e}")
        return 1
    outputs = manifest["outputs"]
    if len(got) != len(outputs):
        print(f"ort_compare: ORT gives {len(got)} outputs, brickdl-run {len(outputs)}")
        return 1
    status = 0
    for y, o in zip(got, outputs):
        ref = np.load(os.path.join(run_dir, o["file"]))
        scale = float(np.max(np.abs(ref))) if ref.size else 0.0
        if y.shape != ref.shape:
            print(f"ort_compare: output {o['name']}: ORT's shape {y.shape}, brickdl's {ref.shape}")
            status = 1
            continue
        if scale == 0.0:
            print(f"ort_compare: output {o['name']}: brickdl's output is all zero")
            status = 1
            continue
        err = float(np.max(np.abs(y.astype(np.float64) - ref))) / scale
        ok = err <= tolerance
        print(f"ort_compare: output {o['name']} {list(y.shape)}: max |ORT - brickdl| / "
              f"max |brickdl| = {err:.3g} ({'within' if ok else 'OVER'} {tolerance:g})")
        status = status if ok else 1
    return status


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: ort_compare.py MODEL.onnx RUN_DIR TOLERANCE")
    sys.exit(compare(sys.argv[1], sys.argv[2], float(sys.argv[3])))
