"""JAX side of the baselines: a netdefs.Net as a jitted XLA function. Import only after jax
was found."""
import numpy as np

import jax
import jax.numpy as jnp
from jax import lax

DTYPES = {"fp32": jnp.float32, "fp16": jnp.float16, "bf16": jnp.bfloat16}
LAYOUTS = {2: ("NCHW", "OIHW", "NCHW"), 3: ("NCDHW", "OIDHW", "NCDHW")}


def init_params(net, dtype, seed=1):
    """Random weights (values do not matter for timing; shapes do), batch-norm folded to a
    per-channel scale and shift as at inference."""
    rng = np.random.default_rng(seed)
    params = {}
    for i, layer in enumerate(net.layers):
        a = layer.attrs
        if layer.op in ("conv", "conv_transpose"):
            cin = net.shape(layer.inputs[0])[0] // a.get("groups", 1)
            w = rng.standard_normal((layer.shape[0], cin, *a["kernel"]), dtype=np.float32)
            params[str(i)] = {"w": jnp.asarray(w * 0.05, dtype)}
            if a["bias"]:
                params[str(i)]["b"] = jnp.zeros((layer.shape[0],), dtype)
        elif layer.op == "batch_norm":
            c = layer.shape[0]
            params[str(i)] = {"scale": jnp.ones((c,), dtype), "shift": jnp.zeros((c,), dtype)}
        elif layer.op == "linear":
            fin = net.shape(layer.inputs[0])[0]
            w = rng.standard_normal((layer.shape[0], fin), dtype=np.float32)
            params[str(i)] = {"w": jnp.asarray(w * 0.01, dtype),
                              "b": jnp.zeros((layer.shape[0],), dtype)}
    return params


def make_forward(net, precision, all_layers=False):
    """forward(params, x) for the whole net, jitted; `precision` is a lax.Precision for convs
    and dots. With all_layers, an unjitted function returning every layer's output (for shape
    checks with jax.eval_shape)."""
    dims = net.dims(0)
    dn = LAYOUTS[dims]

    def channel(v, ndim):
        return v.reshape((1, -1) + (1,) * (ndim - 2))

    def pool(x, init, op, a):
        window = (1, 1) + tuple(a["kernel"])
        strides = (1, 1) + tuple(a["stride"])
        pads = ((0, 0), (0, 0)) + tuple((p, p) for p in a["padding"])
        return lax.reduce_window(x, init, op, window, strides, pads)

    def apply(layer, key, p, xs):
        a, x = layer.attrs, xs[0]
        op = layer.op
        if op == "conv":
            y = lax.conv_general_dilated(
                x, p[key]["w"], a["stride"], [(q, q) for q in a["padding"]],
                rhs_dilation=a["dilation"], dimension_numbers=dn,
                feature_group_count=a["groups"], precision=precision)
            return y + channel(p[key]["b"], y.ndim) if a["bias"] else y
        if op == "conv_transpose":
            # The transposed conv as a conv over the stride-dilated input.
            pads = [(k - 1 - q, k - 1 - q + o) for k, q, o in
                    zip(a["kernel"], a["padding"], a["output_padding"])]
            y = lax.conv_general_dilated(x, p[key]["w"], (1,) * dims, pads,
                                         lhs_dilation=a["stride"], dimension_numbers=dn,
                                         precision=precision)
            return y + channel(p[key]["b"], y.ndim) if a["bias"] else y
        if op == "batch_norm":
            return x * channel(p[key]["scale"], x.ndim) + channel(p[key]["shift"], x.ndim)
        if op == "relu":
            return jnp.maximum(x, 0)
        if op == "leaky_relu":
            return jnp.where(x > 0, x, x * a["slope"])
        if op == "add":
            return xs[0] + xs[1]
        if op == "concat":
            return jnp.concatenate(xs, axis=1)
        if op == "max_pool":
            return pool(x, -jnp.inf, lax.max, a)
        if op == "avg_pool":
            sums = pool(x, 0.0, lax.add, a)
            if a["count_include_pad"]:
                return sums / np.prod(a["kernel"])
            counts = pool(jnp.ones((1, 1) + x.shape[2:], x.dtype), 0.0, lax.add, a)
            return sums / counts
        if op == "global_avg_pool":
            return jnp.mean(x, axis=tuple(range(2, x.ndim)), keepdims=True)
        if op == "tile":
            return jnp.broadcast_to(x, x.shape[:2] + tuple(layer.shape[1:]))
        if op == "flatten":
            return x.reshape((x.shape[0], -1))
        if op == "linear":
            return jnp.dot(x, p[key]["w"].T, precision=precision) + p[key]["b"]
        raise ValueError(f"op {op} has no JAX implementation")

    def forward_all(params, x):
        vals = {0: x}
        for i, layer in enumerate(net.layers[1:], 1):
            vals[i] = apply(layer, str(i), params, [vals[j] for j in layer.inputs])
        return vals

    if all_layers:
        return forward_all
    last = len(net.layers) - 1
    return jax.jit(lambda params, x: forward_all(params, x)[last])
