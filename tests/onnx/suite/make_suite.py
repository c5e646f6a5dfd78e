#!/usr/bin/env python3
"""The ONNX export suite: small torchvision-style networks exported by both PyTorch exporters.

Regenerate (from the repository root, in a virtual environment with torch, torchvision, onnx,
onnxruntime and onnxscript; the committed files were made with torch 2.15.0+cu132, torchvision
0.29.2+cu132, onnx 1.23.2, onnxruntime 1.32.0, onnxscript 0.7.2 and numpy 2.4.6, run on the CPU):

    python3 -m venv ~/suite-env
    ~/suite-env/bin/pip install torch torchvision onnx onnxruntime onnxscript
    ~/suite-env/bin/python tests/onnx/suite/make_suite.py [--only NAME ...]

For every network NAME (random weights from a fixed seed, eval mode, batch-norms with
non-trivial running statistics) it writes into tests/onnx/suite/:

    NAME.input.npy           the input (float32, uniform in [-1, 1), batch 2)
    NAME.ts.onnx             torch.onnx.export(dynamo=False, opset_version=17): TorchScript-based
    NAME.dynamo.onnx         torch.onnx.export(dynamo=True): the default exporter, its default
                             opset and its default external data: the larger weights in
                             NAME.dynamo.onnx.data beside it
    NAME.{ts,dynamo}.outK.npy   ONNX Runtime's output K (CPU execution provider, float32)

(the dynamo exporter's node metadata without its Python stack traces, which name this machine's
paths) and MANIFEST.txt: per exported file, its opsets, domains, local functions, external data,
inputs, outputs and op counts (what the importer meets). The script stops with an error when
ONNX Runtime and PyTorch disagree on a file (by more than 1e-4 of the output's largest
magnitude). tests/onnx/suite_test.cpp imports every file and compares brickdl's CPU reference
and merged plans with these outputs; tests/onnx/suite/expected.txt says which files match and
which are refused, and why. docs/onnx-suite.md has the table.
"""
import argparse
import collections
import importlib
import io
import contextlib
import os
import sys
import warnings
from functools import partial

import numpy as np
import onnx
import onnxruntime as ort
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision
from torchvision.models import convnext, densenet, efficientnet, mnasnet
from torchvision.models import mobilenetv2, mobilenetv3, regnet, resnet, shufflenetv2, squeezenet
from torchvision.models import vgg
from torchvision.models.video import resnet as video_resnet
from torchvision.ops import Conv2dNormActivation

# torchvision.models.googlenet is also the name of its model function
googlenet = importlib.import_module("torchvision.models.googlenet")

HERE = os.path.dirname(os.path.abspath(__file__))
SEED = 20261202
BATCH = 2


def classifier(channels, classes=10):
    return nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(1), nn.Dropout(0.2),
                         nn.Linear(channels, classes))


def cbr(cin, cout, k=3, s=1, act=nn.ReLU):
    return Conv2dNormActivation(cin, cout, kernel_size=k, stride=s, activation_layer=act)


def resnet_net():
    down2 = nn.Sequential(nn.Conv2d(16, 32, 1, 2, bias=False), nn.BatchNorm2d(32))
    down3 = nn.Sequential(nn.Conv2d(32, 64, 1, 2, bias=False), nn.BatchNorm2d(64))
    return nn.Sequential(
        nn.Conv2d(3, 16, 7, 2, 3, bias=False), nn.BatchNorm2d(16), nn.ReLU(inplace=True),
        nn.MaxPool2d(3, 2, 1),
        resnet.BasicBlock(16, 16),
        resnet.BasicBlock(16, 32, stride=2, downsample=down2),
        resnet.Bottleneck(32, 16, stride=2, downsample=down3),  # 16 * expansion 4 = 64
        classifier(64)), (64, 64)


def mobilenet_v2_net():
    ir = mobilenetv2.InvertedResidual
    return nn.Sequential(
        cbr(3, 16, s=2, act=nn.ReLU6),
        ir(16, 16, 1, 1), ir(16, 24, 2, 6), ir(24, 24, 1, 6), ir(24, 32, 2, 6),
        cbr(32, 64, k=1, act=nn.ReLU6), classifier(64)), (64, 64)


def mobilenet_v3_net():
    cfg = partial(mobilenetv3.InvertedResidualConfig, dilation=1, width_mult=1.0)
    bn = partial(nn.BatchNorm2d, eps=0.001, momentum=0.01)
    blocks = [mobilenetv3.InvertedResidual(c, bn) for c in (
        cfg(16, 3, 16, 16, True, "RE", 2),  # squeeze-excitation with Hardsigmoid
        cfg(16, 3, 48, 24, False, "RE", 2),
        cfg(24, 5, 64, 24, True, "HS", 1),  # Hardswish, residual
    )]
    return nn.Sequential(
        cbr(3, 16, s=2, act=nn.Hardswish), *blocks, cbr(24, 48, k=1, act=nn.Hardswish),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(1), nn.Linear(48, 32), nn.Hardswish(),
        nn.Dropout(0.2), nn.Linear(32, 10)), (64, 64)


def efficientnet_net():
    cfg = efficientnet.MBConvConfig
    blocks = [efficientnet.MBConv(c, 0.2, nn.BatchNorm2d) for c in (
        cfg(1, 3, 1, 16, 16, 1), cfg(6, 3, 2, 16, 24, 1), cfg(6, 5, 1, 24, 24, 1))]
    return nn.Sequential(cbr(3, 16, s=2, act=nn.SiLU), *blocks, cbr(24, 64, k=1, act=nn.SiLU),
                         classifier(64)), (64, 64)


def regnet_net():
    block = partial(regnet.ResBottleneckBlock, norm_layer=nn.BatchNorm2d,
                    activation_layer=nn.ReLU, group_width=8, bottleneck_multiplier=1.0,
                    se_ratio=0.25)
    return nn.Sequential(cbr(3, 16, s=2), block(16, 24, 2), block(24, 24, 1), block(24, 48, 2),
                         classifier(48)), (64, 64)


def densenet_net():
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU(inplace=True),
        nn.MaxPool2d(3, 2, 1),
        densenet._DenseBlock(2, 16, bn_size=2, growth_rate=8, drop_rate=0.0),  # 16 + 2*8 = 32
        densenet._Transition(32, 16),
        densenet._DenseBlock(2, 16, bn_size=2, growth_rate=8, drop_rate=0.0),
        nn.BatchNorm2d(32), nn.ReLU(inplace=True), classifier(32)), (32, 32)


class MnasNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(
            cbr(3, 16, s=2), *mnasnet._stack(16, 16, 3, 1, 1, 1, 0.1),
            *mnasnet._stack(16, 24, 3, 2, 3, 2, 0.1), *mnasnet._stack(24, 32, 5, 2, 6, 1, 0.1),
            cbr(32, 64, k=1))
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(64, 10))

    def forward(self, x):
        return self.classifier(self.layers(x).mean([2, 3]))  # as torchvision's MNASNet


def mnasnet_net():
    return MnasNet(), (64, 64)


def shufflenet_net():
    return shufflenetv2.ShuffleNetV2([2, 1, 1], [8, 16, 32, 64, 128], num_classes=10), (64, 64)


def convnext_net():
    cfg = convnext.CNBlockConfig
    return convnext.ConvNeXt([cfg(16, 32, 1), cfg(32, None, 1)], layer_scale=0.5,
                             num_classes=10), (64, 64)


def squeezenet_net():
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, 2), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, ceil_mode=True),
        squeezenet.Fire(16, 4, 8, 8), squeezenet.Fire(16, 4, 8, 8),
        nn.MaxPool2d(3, 2, ceil_mode=True), squeezenet.Fire(16, 8, 16, 16),
        nn.Dropout(0.5), nn.Conv2d(32, 10, 1), nn.ReLU(inplace=True), nn.AdaptiveAvgPool2d(1),
        nn.Flatten(1)), (64, 64)


def googlenet_net():
    conv = googlenet.BasicConv2d
    return nn.Sequential(
        conv(3, 16, kernel_size=7, stride=2, padding=3), nn.MaxPool2d(3, 2, ceil_mode=True),
        conv(16, 16, kernel_size=1), conv(16, 24, kernel_size=3, padding=1),
        nn.MaxPool2d(3, 2, ceil_mode=True),
        googlenet.Inception(24, 8, 8, 16, 4, 8, 8),  # 8 + 16 + 8 + 8 = 40
        googlenet.Inception(40, 16, 8, 16, 4, 8, 8),  # 48
        classifier(48)), (64, 64)


def vgg_net():
    features = vgg.make_layers([8, "M", 16, "M", 32, 32, "M"], batch_norm=True)
    return nn.Sequential(
        features, nn.AdaptiveAvgPool2d((2, 2)), nn.Flatten(1), nn.Linear(32 * 4, 64),
        nn.ReLU(True), nn.Dropout(0.5), nn.Linear(64, 10)), (32, 32)


def alexnet_net():
    return nn.Sequential(
        nn.Conv2d(3, 16, 11, 4, 2), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2),
        nn.Conv2d(16, 32, 5, padding=2), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2),
        nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(inplace=True), nn.AdaptiveAvgPool2d((3, 3)),
        nn.Flatten(1), nn.Dropout(0.5), nn.Linear(32 * 9, 64), nn.ReLU(inplace=True),
        nn.Linear(64, 10)), (64, 64)


class UNet(nn.Module):
    def __init__(self, c=8):
        super().__init__()
        two = lambda i, o: nn.Sequential(cbr(i, o), cbr(o, o))
        self.enc1, self.enc2, self.mid = two(3, c), two(c, 2 * c), two(2 * c, 4 * c)
        self.up2, self.dec2 = nn.ConvTranspose2d(4 * c, 2 * c, 2, 2), two(4 * c, 2 * c)
        self.up1, self.dec1 = nn.ConvTranspose2d(2 * c, c, 2, 2), two(2 * c, c)
        self.head = nn.Conv2d(c, 2, 1)

    def forward(self, x):
        e1 = self.enc1(x)
        e2 = self.enc2(F.max_pool2d(e1, 2))
        m = self.mid(F.max_pool2d(e2, 2))
        d2 = self.dec2(torch.cat([self.up2(m), e2], 1))
        d1 = self.dec1(torch.cat([self.up1(d2), e1], 1))
        return self.head(d1)


def unet_net():
    return UNet(), (32, 32)


def r3d_net():
    block = video_resnet.BasicBlock
    down = nn.Sequential(nn.Conv3d(8, 16, 1, 2, bias=False), nn.BatchNorm3d(16))
    return nn.Sequential(
        nn.Conv3d(3, 8, (3, 7, 7), (1, 2, 2), (1, 3, 3), bias=False), nn.BatchNorm3d(8),
        nn.ReLU(inplace=True),
        block(8, 8, video_resnet.Conv3DSimple),
        block(8, 16, video_resnet.Conv3DSimple, stride=2, downsample=down),
        nn.AdaptiveAvgPool3d(1), nn.Flatten(1), nn.Linear(16, 10)), (8, 32, 32)


class SegHead(nn.Module):
    """A stride-8 backbone, a classifier conv and a bilinear resize back to the input's size,
    as torchvision's segmentation models do (the size is read from the tensor's shape)."""

    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(cbr(3, 16, s=2), cbr(16, 24, s=2), cbr(24, 32, s=2))
        self.head = nn.Sequential(cbr(32, 16), nn.Conv2d(16, 5, 1))

    def forward(self, x):
        y = self.head(self.backbone(x))
        return F.interpolate(y, size=x.shape[-2:], mode="bilinear", align_corners=False)


def seg_head_net():
    return SegHead(), (64, 64)


class DetNeck(nn.Module):
    """A detector neck (FPN / YOLO style): three backbone levels, nearest upsampling x2 and a
    concat on the way down, and two output heads."""

    def __init__(self):
        super().__init__()
        self.c3 = nn.Sequential(cbr(3, 8, s=2), cbr(8, 16, s=2), cbr(16, 16, s=2))  # /8
        self.c4 = cbr(16, 32, s=2)  # /16
        self.c5 = cbr(32, 64, s=2)  # /32
        self.lat5 = cbr(64, 32, k=1)
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.p4 = cbr(64, 32)
        self.lat4 = cbr(32, 16, k=1)
        self.p3 = cbr(32, 16)
        self.head3 = nn.Conv2d(16, 9, 1)
        self.head4 = nn.Conv2d(32, 9, 1)

    def forward(self, x):
        c3 = self.c3(x)
        c4 = self.c4(c3)
        c5 = self.c5(c4)
        p4 = self.p4(torch.cat([self.up(self.lat5(c5)), c4], 1))
        p3 = self.p3(torch.cat([self.up(self.lat4(p4)), c3], 1))
        return self.head3(p3), self.head4(p4)


def det_neck_net():
    return DetNeck(), (64, 64)


NETWORKS = collections.OrderedDict([
    ("resnet", resnet_net), ("mobilenet_v2", mobilenet_v2_net),
    ("mobilenet_v3", mobilenet_v3_net), ("efficientnet", efficientnet_net),
    ("regnet", regnet_net), ("densenet", densenet_net), ("mnasnet", mnasnet_net),
    ("shufflenet", shufflenet_net), ("convnext", convnext_net), ("squeezenet", squeezenet_net),
    ("googlenet", googlenet_net), ("vgg", vgg_net), ("alexnet", alexnet_net),
    ("unet", unet_net), ("r3d", r3d_net), ("seg_head", seg_head_net),
    ("det_neck", det_neck_net),
])


def randomize(model, gen):
    """Non-trivial parameters and batch-norm statistics (a fresh batch-norm is the identity)."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.modules.batchnorm._BatchNorm):
                m.weight.uniform_(0.5, 1.5, generator=gen)
                m.bias.normal_(0.0, 0.1, generator=gen)
                m.running_mean.normal_(0.0, 0.1, generator=gen)
                m.running_var.uniform_(0.5, 1.5, generator=gen)
            elif isinstance(m, (nn.LayerNorm, convnext.LayerNorm2d)):
                m.weight.uniform_(0.5, 1.5, generator=gen)
                m.bias.normal_(0.0, 0.1, generator=gen)
            elif isinstance(m, convnext.CNBlock):
                m.layer_scale.uniform_(0.5, 1.0, generator=gen)


def export_ts(model, x, path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (x,), path, dynamo=False, opset_version=17,
                          input_names=["input"])


def export_dynamo(model, x, path):
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (x,), path, dynamo=True)
    # Each node's metadata holds the Python stack trace of the code it came from, with this
    # machine's paths: left out. Everything else (the other metadata, the external data file
    # and which tensors are in it) stays as the exporter wrote it.
    m = onnx.load(path, load_external_data=False)
    for node in m.graph.node:
        kept = [p for p in node.metadata_props if p.key != "pkg.torch.onnx.stack_trace"]
        del node.metadata_props[:]
        node.metadata_props.extend(kept)
    onnx.save(m, path)


def describe(path):
    """One MANIFEST.txt entry: what the importer meets in the file."""
    m = onnx.load(path, load_external_data=False)
    g = m.graph
    external = sorted({e.value for t in g.initializer for e in t.external_data
                       if e.key == "location"})
    n_ext = sum(1 for t in g.initializer if t.data_location == onnx.TensorProto.EXTERNAL)
    ops = collections.Counter((n.domain or "") + ("::" if n.domain else "") + n.op_type
                              for n in g.node)

    def value_text(v):
        t = v.type.tensor_type
        dims = [d.dim_param or str(d.dim_value) for d in t.shape.dim]
        return "{} {}[{}]".format(v.name, onnx.TensorProto.DataType.Name(t.elem_type).lower(),
                                  ",".join(dims))

    lines = [os.path.basename(path),
             "  ir_version {}; producer {} {}".format(m.ir_version, m.producer_name,
                                                    m.producer_version),
             "  opsets " + ", ".join("{}:{}".format(o.domain or "ai.onnx", o.version)
                                     for o in m.opset_import),
             "  inputs " + "; ".join(value_text(v) for v in g.input),
             "  outputs " + "; ".join(value_text(v) for v in g.output),
             "  initializers {} ({} external{}); value_info {}; functions {}".format(
                 len(g.initializer), n_ext, (" in " + ", ".join(external)) if external else "",
                 len(g.value_info), ", ".join(f.domain + "::" + f.name for f in m.functions)
                 or "none"),
             "  nodes " + ", ".join("{} {}".format(k, v) for k, v in sorted(ops.items()))]
    return "\n".join(lines)


def run_ort(path, x):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    return [np.asarray(o, dtype=np.float32)
            for o in sess.run(None, {sess.get_inputs()[0].name: x})]


def rel_err(a, ref):
    return float(np.max(np.abs(a - ref)) / max(float(np.max(np.abs(ref))), 1e-30))


def build(name):
    torch.manual_seed(SEED)
    gen = torch.Generator().manual_seed(SEED + sum(map(ord, name)))
    model, size = NETWORKS[name]()
    randomize(model, gen)
    model.eval()
    x = torch.rand((BATCH, 3) + size, generator=gen) * 2 - 1
    return model, x


def make(name, out, manifest):
    model, x = build(name)
    with torch.no_grad():
        ref = model(x)
    refs = [r.numpy() for r in (ref if isinstance(ref, tuple) else (ref,))]
    xn = x.numpy().astype(np.float32)
    np.save(os.path.join(out, name + ".input.npy"), xn)
    for tag, export in (("ts", export_ts), ("dynamo", export_dynamo)):
        path = os.path.join(out, "{}.{}.onnx".format(name, tag))
        for stale in (path, path + ".data"):
            if os.path.exists(stale):
                os.remove(stale)
        export(model, x, path)
        outs = run_ort(path, xn)
        assert len(outs) == len(refs), (path, len(outs), len(refs))
        for k, (o, r) in enumerate(zip(outs, refs)):
            err = rel_err(o, r)
            assert o.shape == r.shape and err < 1e-4, (path, k, o.shape, r.shape, err)
            np.save(os.path.join(out, "{}.{}.out{}.npy".format(name, tag, k)), o)
        manifest.append(describe(path))
        print("{:14s} {:6s} {:7.1f} KB  ort vs torch {:.1e}".format(
            name, tag, sum(os.path.getsize(p) for p in (path, path + ".data")
                           if os.path.exists(p)) / 1e3, max(rel_err(o, r)
                                                            for o, r in zip(outs, refs))))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", nargs="*", help="networks to regenerate (default: all)")
    parser.add_argument("--out", default=HERE)
    args = parser.parse_args()
    names = args.only or list(NETWORKS)
    for n in names:
        if n not in NETWORKS:
            sys.exit("unknown network {}; known: {}".format(n, ", ".join(NETWORKS)))
    torch.set_num_threads(1)
    os.makedirs(args.out, exist_ok=True)
    manifest = []
    for name in names:
        make(name, args.out, manifest)
    header = ("# Written by make_suite.py (torch {}, torchvision {}, onnx {}, onnxruntime {}): "
              "per exported file, what the importer meets.\n").format(
                  torch.__version__, torchvision.__version__, onnx.__version__, ort.__version__)
    if not args.only:
        with open(os.path.join(args.out, "MANIFEST.txt"), "w") as f:
            f.write(header + "\n".join(manifest) + "\n")
    else:
        print("\n".join(manifest))


if __name__ == "__main__":
    main()
