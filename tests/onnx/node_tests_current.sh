#!/usr/bin/env bash
# ctest onnx_node_tests_current: the node tests of a current ONNX release (the `onnx` Python
# package pinned in scripts/requirements.txt, which scripts/install-deps.sh puts in .venv),
# written out by make_node_tests.py, through the same harness as Debian's (node_tests.cpp),
# against expected_refusals_current.txt.
#
#   node_tests_current.sh PYTHON OUT_DIR ONNX_TESTS_BINARY SOURCE_DIR
#
# Exit status 77 (skipped) when PYTHON or its onnx package (at the pinned version) is missing,
# or when the node tests skip (no data folder): a gtest skip exits 0, which ctest calls Passed.
set -euo pipefail
python=$1 out=$2 binary=$3 src=$4
pin=$(sed -n 's/^onnx==\([^[:space:]#]*\).*/\1/p' "$src/scripts/requirements.txt")
if [[ ! -x $python ]]; then
  echo "node_tests_current: skipped: no $python (scripts/install-deps.sh makes it)"
  exit 77
fi
"$python" "$src/tests/onnx/make_node_tests.py" "$out" "$pin" || exit $?
export BRICKDL_ONNX_NODE_TESTS=$out
export BRICKDL_ONNX_EXPECTED_REFUSALS=$src/tests/onnx/expected_refusals_current.txt
log=$(mktemp)
trap 'rm -f "$log"' EXIT
rc=0
"$binary" --gtest_filter='OnnxNodeTests.*' | tee "$log" || rc=$?
if [[ $rc -eq 0 ]] && grep -q '^\[  SKIPPED \]' "$log"; then
  echo "node_tests_current: skipped (the gtest skip above)"
  exit 77
fi
exit $rc
