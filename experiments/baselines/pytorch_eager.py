#!/usr/bin/env python3
"""Fig 7 baseline: PyTorch eager (cuDNN under the hood) on the GPU.

    pytorch_eager.py experiments/resnet50.yaml [--db brickdl.db] [--tf32] ...

Builds the experiment's model from netdefs.py (the same layers as brickdl's zoo), times
`--repetitions` forward passes with CUDA events after `--warmup` runs (L2 flushed before each,
untimed), and writes median / quartiles / min / max and all samples into the database's
`baselines` table as framework 'pytorch-eager'. Exits 3 without PyTorch or a CUDA GPU.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

PROG = "pytorch_eager.py"


def main(argv=None):
    args = common.parse_args(PROG, "pytorch-eager", argv)
    try:
        import torch
    except ImportError:
        common.unavailable(PROG, "PyTorch is not installed (pip install torch)")
    if not torch.cuda.is_available():
        common.unavailable(PROG, "PyTorch sees no CUDA GPU")
    import torch_net
    samples = torch_net.time_model(args, PROG)
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
