#!/usr/bin/env python3
"""Fig 7 baseline: torch.compile (Inductor), the successor of the paper's TorchScript.

    torch_compile.py experiments/resnet50.yaml [--mode max-autotune] [--db brickdl.db] ...

The same model and protocol as pytorch_eager.py (compilation happens in the warm-up, which is
not timed); written as framework 'torch-compile' ('torch-compile-<mode>' for a non-default
mode). Exits 3 without PyTorch or a CUDA GPU.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

PROG = "torch_compile.py"
MODES = ("default", "reduce-overhead", "max-autotune")


def main(argv=None):
    def extra(p):
        p.add_argument("--mode", choices=MODES, default="default",
                       help="torch.compile mode (default: default)")

    args = common.parse_args(
        PROG, lambda a: "torch-compile" + ("" if a.mode == "default" else f"-{a.mode}"), argv,
        extra)
    try:
        import torch
    except ImportError:
        common.unavailable(PROG, "PyTorch is not installed (pip install torch)")
    if not torch.cuda.is_available():
        common.unavailable(PROG, "PyTorch sees no CUDA GPU")
    if not hasattr(torch, "compile"):
        common.unavailable(PROG, "this PyTorch has no torch.compile (needs 2.0 or later)")
    import torch_net
    samples = torch_net.time_model(args, PROG, compile_mode=args.mode)
    common.report(PROG, args, samples)
    try:
        row = common.write_baseline(args.db, torch_net.fingerprint(), args.model, args.batch,
                                    args.precision, args.framework, samples,
                                    f"written by experiments/baselines/{PROG}")
    except common.BaselineError as e:
        common.fail(PROG, str(e), common.EXIT_BAD_INPUT)
    print(f"{PROG}: wrote baselines row {row} ({args.framework}) into {args.db}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
