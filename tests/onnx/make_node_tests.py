#!/usr/bin/env python3
"""Writes ONNX's node tests, as the `onnx` Python package generates them, into a folder.

    make_node_tests.py OUT_DIR [VERSION]

Debian's libonnx-testdata (ONNX 1.12) stops at opset 17. The `onnx` package carries its node
tests as code (onnx.backend.test.case.node) rather than files: this runs that code and writes
each case the way libonnx-testdata lays it out, OUT_DIR/test_NAME/model.onnx and
test_data_set_0/{input,output}_K.pb, so tests/onnx/node_tests.cpp reads both the same way.
OUT_DIR/ONNX_VERSION records the package's version; a folder already holding that version is
left as it is. Exit status 77 (ctest's skip) when onnx is missing or is not VERSION: the
expected refusals (tests/onnx/expected_refusals_current.txt) are those of one release.
"""
import os
import shutil
import sys
import warnings


def write_tensor(path, value, name):
    from onnx import TensorProto, numpy_helper
    import numpy as np

    proto = value if isinstance(value, TensorProto) else numpy_helper.from_array(
        np.asarray(value), name)
    with open(path, "wb") as f:
        f.write(proto.SerializeToString())


def write_case(out_dir, case):
    folder = os.path.join(out_dir, case.name)
    data = os.path.join(folder, "test_data_set_0")
    os.makedirs(data)
    with open(os.path.join(folder, "model.onnx"), "wb") as f:
        f.write(case.model.SerializeToString())
    inputs, outputs = case.data_sets[0]
    graph = case.model.graph
    for kind, values, infos in (("input", inputs, graph.input), ("output", outputs, graph.output)):
        for k, value in enumerate(values):
            # A sequence, map or optional value has no TensorProto form; the importer refuses
            # those tests for their types (brickdl's inputs are tensors) without the file.
            if k < len(infos) and not infos[k].type.HasField("tensor_type"):
                continue
            try:
                write_tensor(os.path.join(data, f"{kind}_{k}.pb"), value, infos[k].name)
            except (TypeError, ValueError, NotImplementedError):
                pass  # an element type numpy_helper cannot write (None in an object array)


def main():
    if len(sys.argv) not in (2, 3):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    out_dir = sys.argv[1]
    want = sys.argv[2] if len(sys.argv) == 3 else None
    try:
        import onnx
        import onnx.backend.test.case.node as node_cases
    except ImportError as e:
        print(f"make_node_tests: skipped: the onnx Python package is missing ({e}); "
              "scripts/install-deps.sh installs it into .venv", file=sys.stderr)
        return 77
    if want and onnx.__version__ != want:
        print(f"make_node_tests: skipped: onnx {onnx.__version__} is installed, the expected "
              f"refusals are those of onnx {want} (scripts/install-deps.sh installs it)",
              file=sys.stderr)
        return 77
    stamp = os.path.join(out_dir, "ONNX_VERSION")
    if os.path.exists(stamp) and open(stamp).read().strip() == onnx.__version__:
        return 0
    shutil.rmtree(out_dir, ignore_errors=True)
    os.makedirs(out_dir)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the cases' own numpy warnings (divide by zero, ...)
        cases = node_cases.collect_testcases(None)
        for case in cases:
            write_case(out_dir, case)
    with open(stamp, "w") as f:
        f.write(onnx.__version__ + "\n")
    print(f"make_node_tests: {len(cases)} node tests of onnx {onnx.__version__} in {out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
