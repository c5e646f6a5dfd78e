"""The paper's seven models and two microbenchmarks as framework-neutral layer lists.

Every framework baseline (PyTorch eager, torch.compile, JAX/XLA) builds its network from these
definitions, so all of them run exactly the same layers, shapes and parameter counts. They
follow the same reference definitions as brickdl's zoo (core/zoo/*.cpp), with one difference
where the zoo has to approximate a reference op and a framework does not:
  - DeepCAM's image-level tiling is a broadcast here (the zoo: nearest upsample + a crop by a
    stride-1 max-pool, the same values and shapes, no MACs). Its four ConvTranspose2d(3,
    stride 2, padding 1, output_padding 1) are transposed convs in both, so parameter and MAC
    counts are equal.
Only the standard library is used: parameter and MAC counts can be checked without a framework
(results/tests/test_baselines.py checks them against the published figures).

A Net is a list of Layer records in topological order; layer 0 is the input. Shapes are per
sample, (C, *spatial) with 2 or 3 spatial extents.
"""
from dataclasses import dataclass, field


@dataclass
class Layer:
    name: str
    op: str
    inputs: list
    shape: tuple                      # output (C, *spatial), batch excluded
    attrs: dict = field(default_factory=dict)
    params: int = 0
    macs: int = 0                     # multiply-accumulates per sample


def _tuple(v, n):
    return tuple(v) if isinstance(v, (list, tuple)) else (v,) * n


def _prod(xs):
    p = 1
    for x in xs:
        p *= x
    return p


class Net:
    def __init__(self, name, channels, size):
        self.name = name
        self.layers = [Layer("input", "input", [], (channels, *size))]

    # ---- construction ------------------------------------------------------------------

    def _add(self, name, op, inputs, shape, attrs=None, params=0, macs=0):
        for s in shape[1:]:
            if s < 1:
                raise ValueError(f"{self.name}: layer '{name}' has an empty output {shape}")
        self.layers.append(Layer(name or f"{op}_{len(self.layers)}", op, list(inputs),
                                 tuple(shape), attrs or {}, params, macs))
        return len(self.layers) - 1

    def shape(self, x):
        return self.layers[x].shape

    def dims(self, x):
        return len(self.layers[x].shape) - 1

    def conv(self, x, out, kernel, stride=1, padding=0, dilation=1, groups=1, bias=False,
             name=None):
        c, *sp = self.shape(x)
        n = len(sp)
        k, s, p, d = (_tuple(v, n) for v in (kernel, stride, padding, dilation))
        if c % groups or out % groups:
            raise ValueError(f"{self.name}: '{name}' channels not divisible by groups")
        osp = [(i + 2 * pp - dd * (kk - 1) - 1) // ss + 1 for i, kk, ss, pp, dd in
               zip(sp, k, s, p, d)]
        kvol = _prod(k)
        params = out * (c // groups) * kvol + (out if bias else 0)
        macs = _prod(osp) * out * (c // groups) * kvol
        return self._add(name, "conv", [x], (out, *osp),
                         dict(kernel=k, stride=s, padding=p, dilation=d, groups=groups,
                              bias=bias), params, macs)

    def conv_transpose(self, x, out, kernel, stride, padding, output_padding, bias=False,
                       name=None):
        c, *sp = self.shape(x)
        n = len(sp)
        k, s, p, op = (_tuple(v, n) for v in (kernel, stride, padding, output_padding))
        osp = [(i - 1) * ss - 2 * pp + (kk - 1) + oo + 1 for i, kk, ss, pp, oo in
               zip(sp, k, s, p, op)]
        kvol = _prod(k)
        params = c * out * kvol + (out if bias else 0)
        macs = _prod(sp) * out * c * kvol  # each input point once per tap and output channel
        return self._add(name, "conv_transpose", [x], (out, *osp),
                         dict(kernel=k, stride=s, padding=p, output_padding=op, bias=bias),
                         params, macs)

    def bn(self, x, name=None):
        c = self.shape(x)[0]
        return self._add(name, "batch_norm", [x], self.shape(x), params=2 * c)

    def relu(self, x, name=None):
        return self._add(name, "relu", [x], self.shape(x))

    def leaky_relu(self, x, slope, name=None):
        return self._add(name, "leaky_relu", [x], self.shape(x), dict(slope=slope))

    def add(self, a, b, name=None):
        if self.shape(a) != self.shape(b):
            raise ValueError(f"{self.name}: add '{name}' of {self.shape(a)} and {self.shape(b)}")
        return self._add(name, "add", [a, b], self.shape(a))

    def concat(self, xs, name=None):
        spatial = {self.shape(x)[1:] for x in xs}
        if len(spatial) != 1:
            raise ValueError(f"{self.name}: concat '{name}' of different extents {spatial}")
        return self._add(name, "concat", xs, (sum(self.shape(x)[0] for x in xs),
                                              *self.shape(xs[0])[1:]))

    def _pool(self, op, x, kernel, stride, padding, name, **extra):
        c, *sp = self.shape(x)
        n = len(sp)
        k, s, p = (_tuple(v, n) for v in (kernel, stride, padding))
        osp = [(i + 2 * pp - kk) // ss + 1 for i, kk, ss, pp in zip(sp, k, s, p)]
        return self._add(name, op, [x], (c, *osp), dict(kernel=k, stride=s, padding=p, **extra))

    def max_pool(self, x, kernel, stride, padding=0, name=None):
        return self._pool("max_pool", x, kernel, stride, padding, name)

    def avg_pool(self, x, kernel, stride, padding=0, count_include_pad=True, name=None):
        return self._pool("avg_pool", x, kernel, stride, padding, name,
                          count_include_pad=count_include_pad)

    def global_avg_pool(self, x, name=None):
        c, *sp = self.shape(x)
        return self._add(name, "global_avg_pool", [x], (c, *([1] * len(sp))))

    def tile(self, x, size, name=None):
        """Broadcast of a map with all extents 1 to `size` (DeepCAM's torch.tile)."""
        c, *sp = self.shape(x)
        if any(v != 1 for v in sp):
            raise ValueError(f"{self.name}: tile '{name}' of a non-1x1 map {self.shape(x)}")
        return self._add(name, "tile", [x], (c, *size))

    def flatten(self, x, name=None):
        return self._add(name, "flatten", [x], (_prod(self.shape(x)),))

    def linear(self, x, out, bias=True, name=None):
        (features,) = self.shape(x)
        return self._add(name, "linear", [x], (out,), dict(bias=bias),
                         features * out + (out if bias else 0), features * out)

    # ---- totals ---------------------------------------------------------------------------

    def total_params(self):
        return sum(layer.params for layer in self.layers)

    def total_macs(self):
        return sum(layer.macs for layer in self.layers)

    @property
    def output(self):
        return len(self.layers) - 1


# ---- the models (each mirrors its reference; see core/zoo/<model>.cpp) -------------------

def _resnet50(ch, size, classes):
    n = Net("resnet50", ch, size)
    x = n.relu(n.bn(n.conv(0, 64, 7, 2, 3, name="conv1"), "bn1"), "relu")
    x = n.max_pool(x, 3, 2, 1, "maxpool")
    for stage, blocks in enumerate((3, 4, 6, 3)):
        planes = 64 << stage
        for i in range(blocks):
            p = f"layer{stage + 1}.{i}"
            stride = 2 if stage > 0 and i == 0 else 1
            cin = n.shape(x)[0]
            y = n.relu(n.bn(n.conv(x, planes, 1, name=p + ".conv1"), p + ".bn1"), p + ".relu")
            y = n.relu(n.bn(n.conv(y, planes, 3, stride, 1, name=p + ".conv2"), p + ".bn2"),
                       p + ".relu_1")
            y = n.bn(n.conv(y, planes * 4, 1, name=p + ".conv3"), p + ".bn3")
            identity = x
            if stride != 1 or cin != planes * 4:
                identity = n.bn(n.conv(x, planes * 4, 1, stride, name=p + ".downsample.0"),
                                p + ".downsample.1")
            x = n.relu(n.add(y, identity, p + ".add"), p + ".relu_2")
    x = n.flatten(n.global_avg_pool(x, "avgpool"), "flatten")
    n.linear(x, classes, True, "fc")
    return n


def _vgg16_bn(ch, size, classes):
    n = Net("vgg16_bn", ch, size)
    x, idx = 0, 0
    for v in (64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512, 0, 512, 512, 512, 0):
        if v == 0:
            x = n.max_pool(x, 2, 2, 0, f"features.{idx}")
            idx += 1
        else:
            x = n.conv(x, v, 3, 1, 1, bias=True, name=f"features.{idx}")
            x = n.bn(x, f"features.{idx + 1}")
            x = n.relu(x, f"features.{idx + 2}")
            idx += 3
    c, h, w = n.shape(x)
    if (h, w) != (7, 7):  # AdaptiveAvgPool2d((7, 7)) is an identity at 224
        if h % 7 or w % 7:
            raise ValueError("vgg16_bn needs an input size that is a multiple of 224")
        x = n.avg_pool(x, (h // 7, w // 7), (h // 7, w // 7), name="avgpool")
    x = n.flatten(x, "flatten")
    x = n.relu(n.linear(x, 4096, True, "classifier.0"), "classifier.1")
    x = n.relu(n.linear(x, 4096, True, "classifier.3"), "classifier.4")
    n.linear(x, classes, True, "classifier.6")
    return n


def _darknet53(ch, size, classes):
    n = Net("darknet53", ch, size)

    def cbl(x, out, k, stride, p):
        c = n.conv(x, out, k, stride, k // 2, name=p + ".conv")
        return n.leaky_relu(n.bn(c, p + ".bn"), 0.1, p + ".act")

    x = cbl(0, 32, 3, 1, "stem.conv1")
    for s, blocks in enumerate((1, 2, 8, 8, 4)):
        channels = 64 << s
        x = cbl(x, channels, 3, 2, f"stages.{s}.conv_down")
        for i in range(blocks):
            p = f"stages.{s}.blocks.{i}"
            y = cbl(x, channels // 2, 1, 1, p + ".conv1")
            y = cbl(y, channels, 3, 1, p + ".conv2")
            x = n.add(y, x, p + ".add")
    x = n.flatten(n.global_avg_pool(x, "head.global_pool"), "head.flatten")
    n.linear(x, classes, True, "head.fc")
    return n


def _drn_c_26(ch, size, classes):
    n = Net("drn_c_26", ch, size)
    levels = [(16, 1, 1, 1, True), (32, 1, 2, 1, True), (64, 2, 2, 1, True),
              (128, 2, 2, 1, True), (256, 2, 1, 2, True), (512, 2, 1, 4, True),
              (512, 1, 1, 2, False), (512, 1, 1, 1, False)]
    x = n.relu(n.bn(n.conv(0, 16, 7, 1, 3, name="conv1"), "bn1"), "relu")
    for li, (channels, blocks, lstride, d, residual) in enumerate(levels):
        for i in range(blocks):
            p = f"layer{li + 1}.{i}"
            stride = lstride if i == 0 else 1
            cin = n.shape(x)[0]
            y = n.relu(n.bn(n.conv(x, channels, 3, stride, d, d, name=p + ".conv1"),
                            p + ".bn1"), p + ".relu")
            y = n.bn(n.conv(y, channels, 3, 1, d, d, name=p + ".conv2"), p + ".bn2")
            if residual:
                identity = x
                if stride != 1 or cin != channels:
                    identity = n.bn(n.conv(x, channels, 1, stride, name=p + ".downsample.0"),
                                    p + ".downsample.1")
                y = n.add(y, identity, p + ".add")
            x = n.relu(y, p + ".relu_1")
    x = n.global_avg_pool(x, "avgpool")
    x = n.conv(x, classes, 1, bias=True, name="fc")
    n.flatten(x, "view")
    return n


def _resnet3d_34(ch, size, classes):
    n = Net("resnet3d_34", ch, size)
    x = n.conv(0, 64, 7, (1, 2, 2), 3, name="conv1")
    x = n.relu(n.bn(x, "bn1"), "relu")
    x = n.max_pool(x, 3, 2, 1, "maxpool")
    for stage, blocks in enumerate((3, 4, 6, 3)):
        planes = 64 << stage
        for i in range(blocks):
            p = f"layer{stage + 1}.{i}"
            stride = 2 if stage > 0 and i == 0 else 1
            cin = n.shape(x)[0]
            y = n.relu(n.bn(n.conv(x, planes, 3, stride, 1, name=p + ".conv1"), p + ".bn1"),
                       p + ".relu")
            y = n.bn(n.conv(y, planes, 3, 1, 1, name=p + ".conv2"), p + ".bn2")
            identity = x
            if stride != 1 or cin != planes:
                identity = n.bn(n.conv(x, planes, 1, stride, name=p + ".downsample.0"),
                                p + ".downsample.1")
            x = n.relu(n.add(y, identity, p + ".add"), p + ".relu_1")
    x = n.flatten(n.global_avg_pool(x, "avgpool"), "view")
    n.linear(x, classes, True, "fc")
    return n


def _deepcam(ch, size, classes):
    n = Net("deepcam", ch, size)
    xf = "xception_features."

    def separable(x, out, stride, dilation, p):
        cin = n.shape(x)[0]
        dw = n.conv(x, cin, 3, stride, dilation, dilation, cin, name=p + ".conv1")
        return n.conv(dw, out, 1, name=p + ".pointwise")

    def block(inp, planes, reps, stride, dilation, end_with_relu, grow_first, is_last, p):
        inplanes = n.shape(inp)[0]
        outs = [planes] if grow_first else []
        outs += [planes if grow_first else inplanes] * (reps - 1)
        if not grow_first:
            outs.append(planes)
        x, idx = inp, 0
        for i, out in enumerate(outs):
            x = separable(x, out, 1, dilation, f"{p}.rep.{idx}")
            x = n.bn(x, f"{p}.rep.{idx + 1}.bn")
            idx += 2
            if i + 1 < len(outs):
                x = n.relu(x, f"{p}.rep.{idx}")
                idx += 1
        if stride != 1:
            x = separable(x, planes, stride, 1, f"{p}.rep.{idx}")
        elif is_last:
            x = separable(x, planes, 1, 1, f"{p}.rep.{idx}")
        skip = inp
        if planes != inplanes or stride != 1:
            skip = n.bn(n.conv(inp, planes, 1, stride, name=p + ".skip"), p + ".skipbn.bn")
        x = n.add(x, skip, p + ".add")
        return n.relu(x, p + ".relu") if end_with_relu else x

    def aspp(x, rate, p):
        k, pad = (1, 0) if rate == 1 else (3, rate)
        c = n.conv(x, 256, k, 1, pad, rate, name=p + ".atrous_convolution")
        return n.relu(n.bn(c, p + ".bn.bn"), p + ".relu")

    x = n.relu(n.bn(n.conv(0, 32, 3, 2, 1, name=xf + "conv1"), xf + "bn1.bn"), xf + "relu")
    x = n.relu(n.bn(n.conv(x, 64, 3, 1, 1, name=xf + "conv2"), xf + "bn2.bn"), xf + "relu_1")
    x = block(x, 128, 2, 2, 1, False, True, False, xf + "block1")
    x = n.relu(x, xf + "relu_2")
    low_level = x
    x = block(x, 256, 2, 2, 1, True, True, False, xf + "block2")
    x = block(x, 728, 2, 2, 1, True, True, True, xf + "block3")
    for i in range(4, 20):
        x = block(x, 728, 3, 1, 1, True, True, False, xf + f"block{i}")
    x = block(x, 1024, 2, 1, 1, False, False, True, xf + "block20")
    for i, out in ((3, 1536), (4, 1536), (5, 2048)):
        x = separable(x, out, 1, 2, xf + f"conv{i}")
        x = n.relu(n.bn(x, xf + f"bn{i}.bn"), xf + f"relu_{i}")

    bn = "bottleneck."
    branches = [aspp(x, r, bn + f"aspp{i + 1}") for i, r in enumerate((1, 6, 12, 18))]
    gp = bn + "global_avg_pool.global_average_pool."
    a5 = n.conv(n.global_avg_pool(x, gp + "0"), 256, 1, name=gp + "1")
    a5 = n.relu(n.bn(a5, gp + "2"), gp + "3")  # TrainableAffine: a per-channel affine map
    a5 = n.tile(a5, n.shape(x)[1:], bn + "tile")
    x = n.concat(branches + [a5], bn + "cat")
    x = n.relu(n.bn(n.conv(x, 256, 1, name=bn + "conv"), bn + "bn.bn"), bn + "relu")

    low = n.relu(n.bn(n.conv(low_level, 48, 1, name="conv2"), "bn2.bn"), "relu")
    up = "upsample."

    def deconv(x, out, p):
        return n.conv_transpose(x, out, 3, 2, 1, 1, name=p)

    x = n.relu(n.bn(deconv(x, 256, up + "deconv1.0"), up + "deconv1.1.bn"), up + "deconv1.2")
    x = n.relu(n.bn(deconv(x, 256, up + "deconv1.3"), up + "deconv1.4.bn"), up + "deconv1.5")
    x = n.concat([x, low], up + "cat")
    x = n.relu(n.bn(n.conv(x, 256, 3, 1, 1, name=up + "conv1.0"), up + "conv1.1.bn"),
               up + "conv1.2")
    x = n.relu(n.bn(n.conv(x, 256, 3, 1, 1, name=up + "conv1.3"), up + "conv1.4.bn"),
               up + "conv1.5")
    x = n.conv(x, 256, 1, bias=True, name=up + "conv1.6")
    x = n.relu(n.bn(deconv(x, 256, up + "deconv2.0"), up + "deconv2.1.bn"), up + "deconv2.2")
    deconv(x, classes, up + "last_deconv.0")
    return n


def _inception_v4(ch, size, classes):
    n = Net("inception_v4", ch, size)

    def conv(x, out, k, stride, pad, p):
        c = n.conv(x, out, k, stride, pad, name=p + ".conv")
        return n.relu(n.bn(c, p + ".bn"), p + ".relu")

    def mp(x, name):
        return n.max_pool(x, 3, 2, 0, name)

    def ap(x, name):
        return n.avg_pool(x, 3, 1, 1, count_include_pad=False, name=name)

    def inception_a(x, p):
        x0 = conv(x, 96, 1, 1, 0, p + ".branch0")
        x1 = conv(conv(x, 64, 1, 1, 0, p + ".branch1.0"), 96, 3, 1, 1, p + ".branch1.1")
        x2 = conv(x, 64, 1, 1, 0, p + ".branch2.0")
        x2 = conv(conv(x2, 96, 3, 1, 1, p + ".branch2.1"), 96, 3, 1, 1, p + ".branch2.2")
        x3 = conv(ap(x, p + ".branch3.0"), 96, 1, 1, 0, p + ".branch3.1")
        return n.concat([x0, x1, x2, x3], p + ".cat")

    def reduction_a(x, p):
        x0 = conv(x, 384, 3, 2, 0, p + ".branch0")
        x1 = conv(x, 192, 1, 1, 0, p + ".branch1.0")
        x1 = conv(conv(x1, 224, 3, 1, 1, p + ".branch1.1"), 256, 3, 2, 0, p + ".branch1.2")
        return n.concat([x0, x1, mp(x, p + ".branch2")], p + ".cat")

    def inception_b(x, p):
        x0 = conv(x, 384, 1, 1, 0, p + ".branch0")
        x1 = conv(x, 192, 1, 1, 0, p + ".branch1.0")
        x1 = conv(x1, 224, (1, 7), 1, (0, 3), p + ".branch1.1")
        x1 = conv(x1, 256, (7, 1), 1, (3, 0), p + ".branch1.2")
        x2 = conv(x, 192, 1, 1, 0, p + ".branch2.0")
        x2 = conv(x2, 192, (7, 1), 1, (3, 0), p + ".branch2.1")
        x2 = conv(x2, 224, (1, 7), 1, (0, 3), p + ".branch2.2")
        x2 = conv(x2, 224, (7, 1), 1, (3, 0), p + ".branch2.3")
        x2 = conv(x2, 256, (1, 7), 1, (0, 3), p + ".branch2.4")
        x3 = conv(ap(x, p + ".branch3.0"), 128, 1, 1, 0, p + ".branch3.1")
        return n.concat([x0, x1, x2, x3], p + ".cat")

    def reduction_b(x, p):
        x0 = conv(conv(x, 192, 1, 1, 0, p + ".branch0.0"), 192, 3, 2, 0, p + ".branch0.1")
        x1 = conv(x, 256, 1, 1, 0, p + ".branch1.0")
        x1 = conv(x1, 256, (1, 7), 1, (0, 3), p + ".branch1.1")
        x1 = conv(x1, 320, (7, 1), 1, (3, 0), p + ".branch1.2")
        x1 = conv(x1, 320, 3, 2, 0, p + ".branch1.3")
        return n.concat([x0, x1, mp(x, p + ".branch2")], p + ".cat")

    def inception_c(x, p):
        x0 = conv(x, 256, 1, 1, 0, p + ".branch0")
        x1_0 = conv(x, 384, 1, 1, 0, p + ".branch1_0")
        x1 = n.concat([conv(x1_0, 256, (1, 3), 1, (0, 1), p + ".branch1_1a"),
                       conv(x1_0, 256, (3, 1), 1, (1, 0), p + ".branch1_1b")], p + ".cat")
        x2 = conv(x, 384, 1, 1, 0, p + ".branch2_0")
        x2 = conv(x2, 448, (3, 1), 1, (1, 0), p + ".branch2_1")
        x2 = conv(x2, 512, (1, 3), 1, (0, 1), p + ".branch2_2")
        x2 = n.concat([conv(x2, 256, (1, 3), 1, (0, 1), p + ".branch2_3a"),
                       conv(x2, 256, (3, 1), 1, (1, 0), p + ".branch2_3b")], p + ".cat_1")
        x3 = conv(ap(x, p + ".branch3.0"), 256, 1, 1, 0, p + ".branch3.1")
        return n.concat([x0, x1, x2, x3], p + ".cat_2")

    f = iter(range(100))
    x = conv(0, 32, 3, 2, 0, f"features.{next(f)}")
    x = conv(x, 32, 3, 1, 0, f"features.{next(f)}")
    x = conv(x, 64, 3, 1, 1, f"features.{next(f)}")
    p = f"features.{next(f)}"  # mixed_3a
    x = n.concat([mp(x, p + ".maxpool"), conv(x, 96, 3, 2, 0, p + ".conv")], p + ".cat")
    p = f"features.{next(f)}"  # mixed_4a
    x0 = conv(conv(x, 64, 1, 1, 0, p + ".branch0.0"), 96, 3, 1, 0, p + ".branch0.1")
    x1 = conv(x, 64, 1, 1, 0, p + ".branch1.0")
    x1 = conv(x1, 64, (1, 7), 1, (0, 3), p + ".branch1.1")
    x1 = conv(x1, 64, (7, 1), 1, (3, 0), p + ".branch1.2")
    x1 = conv(x1, 96, 3, 1, 0, p + ".branch1.3")
    x = n.concat([x0, x1], p + ".cat")
    p = f"features.{next(f)}"  # mixed_5a
    x = n.concat([conv(x, 192, 3, 2, 0, p + ".conv"), mp(x, p + ".maxpool")], p + ".cat")
    for _ in range(4):
        x = inception_a(x, f"features.{next(f)}")
    x = reduction_a(x, f"features.{next(f)}")
    for _ in range(7):
        x = inception_b(x, f"features.{next(f)}")
    x = reduction_b(x, f"features.{next(f)}")
    for _ in range(3):
        x = inception_c(x, f"features.{next(f)}")
    x = n.flatten(n.global_avg_pool(x, "global_pool"), "flatten")
    n.linear(x, classes, True, "last_linear")
    return n


def _conv_chain(name, depth):
    def build(ch, size, classes):
        del classes
        n = Net(name, ch, size)
        x = 0
        for i in range(1, depth + 1):
            x = n.relu(n.conv(x, ch, 3, 1, 1, name=f"conv{i}"), f"relu{i}")
        return n
    return build


# name -> (builder, default input channels, default size, default classes)
MODELS = {
    "resnet50": (_resnet50, 3, (224, 224), 1000),
    "vgg16_bn": (_vgg16_bn, 3, (224, 224), 1000),
    "darknet53": (_darknet53, 3, (256, 256), 1000),
    "drn_c_26": (_drn_c_26, 3, (224, 224), 1000),
    "resnet3d_34": (_resnet3d_34, 3, (16, 112, 112), 400),
    "deepcam": (_deepcam, 16, (768, 1152), 3),
    "inception_v4": (_inception_v4, 3, (299, 299), 1000),
    "micro_graphsize": (_conv_chain("micro_graphsize", 6), 3, (112, 112, 112), 0),
    "micro_bricksize": (_conv_chain("micro_bricksize", 3), 3, (224, 224, 224), 0),
}


def build(name, input_size=None, input_channels=0, num_classes=0):
    """The Net of a zoo model name; raises KeyError naming the valid names."""
    if name not in MODELS:
        raise KeyError(f"unknown model '{name}'; these scripts know {', '.join(MODELS)}")
    builder, ch, size, classes = MODELS[name]
    return builder(input_channels or ch, tuple(input_size or size), num_classes or classes)
