"""PyTorch side of the baselines: a netdefs.Net as an nn.Module, and the CUDA-event timing loop
shared by pytorch_eager.py and torch_compile.py. Import only after torch was found."""
import time

import torch
from torch import nn

import common

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
FLUSH_BYTES = 256 << 20  # larger than the L2 cache of any current GPU


def _module(layer, net, dims):
    """The nn.Module of a layer with weights, or None for the ops done in forward()."""
    a = layer.attrs
    cin = net.shape(layer.inputs[0])[0] if layer.inputs else 0
    if layer.op == "conv":
        cls = nn.Conv3d if dims == 3 else nn.Conv2d
        return cls(cin, layer.shape[0], a["kernel"], a["stride"], a["padding"], a["dilation"],
                   a["groups"], a["bias"])
    if layer.op == "conv_transpose":
        cls = nn.ConvTranspose3d if dims == 3 else nn.ConvTranspose2d
        return cls(cin, layer.shape[0], a["kernel"], a["stride"], a["padding"],
                   a["output_padding"], bias=a["bias"])
    if layer.op == "batch_norm":
        return (nn.BatchNorm3d if dims == 3 else nn.BatchNorm2d)(layer.shape[0])
    if layer.op == "linear":
        return nn.Linear(net.shape(layer.inputs[0])[0], layer.shape[0], a["bias"])
    if layer.op == "max_pool":
        return (nn.MaxPool3d if dims == 3 else nn.MaxPool2d)(a["kernel"], a["stride"],
                                                              a["padding"])
    if layer.op == "avg_pool":
        return (nn.AvgPool3d if dims == 3 else nn.AvgPool2d)(
            a["kernel"], a["stride"], a["padding"], count_include_pad=a["count_include_pad"])
    if layer.op == "global_avg_pool":
        return (nn.AdaptiveAvgPool3d if dims == 3 else nn.AdaptiveAvgPool2d)(1)
    if layer.op == "relu":
        return nn.ReLU()
    if layer.op == "leaky_relu":
        return nn.LeakyReLU(a["slope"])
    return None


class NetModule(nn.Module):
    """Runs the layers in order, dropping each intermediate after its last reader."""

    def __init__(self, net):
        super().__init__()
        dims = net.dims(0)
        self.mods = nn.ModuleDict()
        self.plan = []
        last_use = {}
        for i, layer in enumerate(net.layers):
            for j in layer.inputs:
                last_use[j] = i
        for i, layer in enumerate(net.layers[1:], 1):
            m = _module(layer, net, dims)
            if m is not None:
                self.mods[str(i)] = m
            free = tuple(j for j in layer.inputs if last_use.get(j) == i)
            self.plan.append((i, layer.op, tuple(layer.inputs), layer.shape, free))

    def forward(self, x):
        vals = {0: x}
        for i, op, ins, shape, free in self.plan:
            if op == "add":
                y = vals[ins[0]] + vals[ins[1]]
            elif op == "concat":
                y = torch.cat([vals[j] for j in ins], 1)
            elif op == "tile":
                y = vals[ins[0]].expand(-1, -1, *shape[1:])
            elif op == "flatten":
                y = torch.flatten(vals[ins[0]], 1)
            else:
                y = self.mods[str(i)](vals[ins[0]])
            for j in free:
                del vals[j]
            vals[i] = y
        return vals[i]


def fingerprint():
    name = torch.cuda.get_device_name()
    cc = "".join(str(v) for v in torch.cuda.get_device_capability())
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    return common.gpu_fingerprint(name, cc=cc, cuda=torch.version.cuda, cudnn=cudnn)


def check_torchvision(net, module, prog):
    """For the torchvision models, says whether the parameter counts agree."""
    try:
        import torchvision
    except ImportError:
        return
    ref = getattr(torchvision.models, net.name, None)
    if ref is None:
        return
    n_ref = sum(p.numel() for p in ref().parameters())
    n_ours = sum(p.numel() for p in module.parameters())
    verdict = "agree" if n_ref == n_ours else "DIFFER"
    print(f"{prog}: parameters {verdict} with torchvision.models.{net.name}: {n_ours} vs "
          f"{n_ref}")


def time_model(args, prog, compile_mode=None):
    """Samples (ms) of `args.repetitions` forward passes timed with CUDA events."""
    torch.backends.cudnn.allow_tf32 = bool(args.tf32)
    torch.backends.cuda.matmul.allow_tf32 = bool(args.tf32)
    torch.backends.cudnn.benchmark = True  # per-shape algorithm search, as cudnnFind
    dev = torch.device("cuda")
    dtype = DTYPES[args.precision]
    torch.manual_seed(1)
    model = NetModule(args.net)
    check_torchvision(args.net, model, prog)
    model = model.to(dev, dtype).eval()
    x = torch.randn((args.batch, *args.net.shape(0)), device=dev, dtype=dtype)
    if compile_mode is not None:
        model = torch.compile(model, mode=None if compile_mode == "default" else compile_mode)
    flush = None if args.no_flush_l2 else torch.empty(FLUSH_BYTES, dtype=torch.int8, device=dev)
    samples = []
    with torch.inference_mode():
        t0 = time.perf_counter()
        for _ in range(max(args.warmup, 1)):  # the first call compiles (torch.compile)
            model(x)
        torch.cuda.synchronize()
        print(f"{prog}: warm-up ({max(args.warmup, 1)} runs) took "
              f"{time.perf_counter() - t0:.1f} s")
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        for _ in range(args.repetitions):
            if flush is not None:
                flush.zero_()  # evicts the L2 cache; before `start`, so it is not timed
            start.record()
            model(x)
            end.record()
            end.synchronize()
            samples.append(start.elapsed_time(end))
    return samples
