#!/usr/bin/env python3
"""Fig 7 baseline: JAX/XLA (in the role of the paper's TensorFlow XLA) on the GPU.

    jax_xla.py experiments/resnet50.yaml [--db brickdl.db] [--tf32] ...

Builds the experiment's model from netdefs.py as one jitted function and times `--repetitions`
calls after `--warmup` runs (the first compiles). JAX exposes no CUDA events, so each
repetition is timed on the host around a call that waits for its result
(`block_until_ready`): this includes the dispatch of one XLA executable (some microseconds).
A 256 MiB buffer is rewritten before each repetition, untimed, to evict the L2 cache. fp32 runs
at lax.Precision.HIGHEST (strict fp32) unless --tf32. Written as framework 'jax-xla'.
Exits 3 without JAX or a GPU.
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

PROG = "jax_xla.py"


def main(argv=None):
    args = common.parse_args(PROG, "jax-xla", argv)
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        common.unavailable(PROG, "JAX is not installed (pip install 'jax[cuda12]')")
    try:
        gpus = jax.devices("gpu")
    except RuntimeError:
        gpus = []
    if not gpus:
        common.unavailable(PROG, "JAX sees no GPU")
    import jax_net
    from jax import lax

    dtype = jax_net.DTYPES[args.precision]
    precision = (lax.Precision.DEFAULT if args.tf32 or args.precision != "fp32"
                 else lax.Precision.HIGHEST)
    with jax.default_device(gpus[0]):
        params = jax_net.init_params(args.net, dtype)
        forward = jax_net.make_forward(args.net, precision)
        x = jax.random.normal(jax.random.PRNGKey(1), (args.batch, *args.net.shape(0)), dtype)
        flush_buf = jnp.zeros((64 << 20,), jnp.float32)  # 256 MiB
        flush = jax.jit(lambda b: b + 1)
        t0 = time.perf_counter()
        for _ in range(max(args.warmup, 1)):
            forward(params, x).block_until_ready()
        print(f"{PROG}: warm-up ({max(args.warmup, 1)} runs, compiling) took "
              f"{time.perf_counter() - t0:.1f} s")
        samples = []
        for _ in range(args.repetitions):
            if not args.no_flush_l2:
                flush_buf = flush(flush_buf)
                flush_buf.block_until_ready()
            t = time.perf_counter()
            forward(params, x).block_until_ready()
            samples.append((time.perf_counter() - t) * 1e3)
    common.report(PROG, args, samples)
    dev = gpus[0]
    cc = getattr(dev, "compute_capability", None)
    fingerprint = common.gpu_fingerprint(dev.device_kind,
                                         cc=str(cc).replace(".", "") if cc else None)
    try:
        row = common.write_baseline(args.db, fingerprint, args.model, args.batch,
                                    args.precision, args.framework, samples,
                                    f"written by experiments/baselines/{PROG}")
    except common.BaselineError as e:
        common.fail(PROG, str(e), common.EXIT_BAD_INPUT)
    print(f"{PROG}: wrote baselines row {row} ({args.framework}) into {args.db}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
