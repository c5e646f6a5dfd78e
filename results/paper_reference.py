"""The paper's published A100 numbers, typed by hand for comparison in our figures.

Source: "BrickDL, ICPP '24, artifact data" -- the CSV files the authors published with the
paper's artifact (BrickDL: Graph-Level Optimizations for DNNs with Fine-Grained Data Blocking
on GPUs, ICPP '24, DOI 10.1145/3673038.3673046), measured on an NVIDIA A100-40GB.
Where the artifact's "Total" rows are garbled or shifted, the values below are the component
rows, whose sums reproduce the totals quoted in the paper's text (tests/test_paper_reference
checks that every bar's memory side and compute side add up to the same total).

Breakdown keys follow the paper's figures: the memory side ("M") is idle + dram, the compute
side ("C") is compute + atomics_compulsory + atomics_conflict + other; both add to the bar's
total. Figs 7-9 are normalized to cuDNN layer-by-layer = 1.0; Figs 10-11 are absolute
milliseconds as published.
"""

SOURCE = "BrickDL, ICPP '24, artifact data"
GPU = "A100-40GB"

# Fig 7 (artifact file model_perf.csv): end-to-end time normalized to cuDNN = 1.0.
# Keys are brickdl zoo model names; `label` is the paper's axis label.
FIG7 = {
    "resnet50": dict(label="ResNet-50", cudnn_memory=0.68, cudnn_compute=0.32,
                     brickdl_memory=0.55, brickdl_compute=0.30,
                     torchscript=0.865, xla=0.875),
    "drn_c_26": dict(label="DRN-26", cudnn_memory=0.63, cudnn_compute=0.37,
                     brickdl_memory=0.545, brickdl_compute=0.37,
                     torchscript=0.94, xla=0.925),
    "resnet3d_34": dict(label="3D ResNet-34", cudnn_memory=0.72, cudnn_compute=0.28,
                        brickdl_memory=0.60, brickdl_compute=0.27,
                        torchscript=0.90, xla=0.92),
    "darknet53": dict(label="DarkNet-53", cudnn_memory=0.70, cudnn_compute=0.30,
                      brickdl_memory=0.55, brickdl_compute=0.29,
                      torchscript=0.86, xla=0.875),
    "vgg16_bn": dict(label="VGG-16", cudnn_memory=0.60, cudnn_compute=0.40,
                     brickdl_memory=0.54, brickdl_compute=0.393,
                     torchscript=0.896, xla=0.91),
    "deepcam": dict(label="DeepCAM", cudnn_memory=0.73, cudnn_compute=0.27,
                    brickdl_memory=0.61, brickdl_compute=0.25,
                    torchscript=0.875, xla=0.84),
    "inception_v4": dict(label="InceptionNet", cudnn_memory=0.70, cudnn_compute=0.30,
                         brickdl_memory=0.605, brickdl_compute=0.29,
                         torchscript=0.91, xla=0.87),
}
# The paper's order of models on Fig 7's x axis.
FIG7_ORDER = ["resnet50", "drn_c_26", "resnet3d_34", "darknet53", "vgg16_bn", "deepcam",
              "inception_v4"]
# Which of our framework baselines stands in for which of the paper's (torch.compile is the
# successor of TorchScript; JAX/XLA plays TensorFlow XLA's part).
FIG7_FRAMEWORK_PAPER_KEY = {"torch-compile": "torchscript", "jax-xla": "xla"}


def _bar(idle, dram, compute, atomics_compulsory, atomics_conflict, other):
    return dict(idle=idle, dram=dram, compute=compute, atomics_compulsory=atomics_compulsory,
                atomics_conflict=atomics_conflict, other=other)


# Fig 8 (artifact file resnet_perf.csv): ResNet-50 subgraphs 1-7, normalized to cuDNN.
FIG8 = [
    dict(cudnn=_bar(0.22, 0.78, 0.18, 0, 0, 0.82),
         padded=_bar(0.20, 0.58, 0.14, 0, 0, 0.64),
         memoized=_bar(0.25, 0.57, 0.155, 0.02, 0.045, 0.60)),
    dict(cudnn=_bar(0.25, 0.75, 0.23, 0, 0, 0.77),
         padded=_bar(0.22, 0.58, 0.17, 0, 0, 0.63),
         memoized=_bar(0.26, 0.57, 0.18, 0.017, 0.036, 0.597)),
    dict(cudnn=_bar(0.30, 0.70, 0.26, 0, 0, 0.74),
         padded=_bar(0.27, 0.62, 0.23, 0, 0, 0.66),
         memoized=_bar(0.26, 0.58, 0.21, 0.013, 0.022, 0.595)),
    dict(cudnn=_bar(0.32, 0.68, 0.27, 0, 0, 0.73),
         padded=_bar(0.27, 0.61, 0.24, 0, 0, 0.64),
         memoized=_bar(0.27, 0.56, 0.20, 0.011, 0.02, 0.599)),
    dict(cudnn=_bar(0.30, 0.70, 0.26, 0, 0, 0.74),
         padded=_bar(0.26, 0.64, 0.23, 0, 0, 0.67),
         memoized=_bar(0.27, 0.58, 0.21, 0.012, 0.021, 0.607)),
    dict(cudnn=_bar(0.38, 0.62, 0.32, 0, 0, 0.68),
         padded=_bar(0.36, 0.58, 0.32, 0, 0, 0.62),
         memoized=_bar(0.34, 0.55, 0.30, 0.007, 0.013, 0.57)),
    dict(cudnn=_bar(0.40, 0.60, 0.35, 0, 0, 0.65),
         padded=_bar(0.36, 0.59, 0.30, 0, 0, 0.65),
         memoized=_bar(0.32, 0.58, 0.28, 0.007, 0.012, 0.601)),
]

# Fig 9 (artifact file resnet_data.csv): transactions relative to cuDNN, per subgraph 1-7,
# as (L1 / global, L2, DRAM).
FIG9 = [
    dict(padded=(1.35, 1.20, 0.79), memoized=(1.25, 1.17, 0.83)),
    dict(padded=(1.32, 1.17, 0.81), memoized=(1.22, 1.15, 0.84)),
    dict(padded=(1.20, 1.10, 0.90), memoized=(1.27, 1.12, 0.86)),
    dict(padded=(1.16, 1.08, 0.88), memoized=(1.24, 1.14, 0.83)),
    dict(padded=(1.17, 1.09, 0.91), memoized=(1.20, 1.12, 0.87)),
    dict(padded=(1.09, 1.02, 0.94), memoized=(1.13, 1.07, 0.90)),
    dict(padded=(1.07, 1.01, 0.96), memoized=(1.10, 1.04, 0.92)),
]

# Fig 10 (artifact file bench_graphsize.csv): 6-layer 3-D conv chain, absolute ms.
FIG10_EDGE = 112  # the chain's input is 112^3 x 3 channels, batch 1
FIG10_CUDNN = _bar(633, 807, 570, 0, 0, 870)
# The artifact's "Total" row of Fig 10 is shifted by one bar: it reads 1420 under cuDNN, which
# is the total of 2+2+2 padded; the cuDNN components and the paper's text give 1440.
FIG10_CUDNN_TOTAL_ROW = 1420
FIG10 = {
    "2+2+2": dict(padded=_bar(650, 770, 595, 0, 0, 825),
                  memoized=_bar(697, 698, 545, 22, 40, 788)),
    "3+3": dict(padded=_bar(635, 710, 580, 0, 0, 765),
                memoized=_bar(645, 665, 530, 28, 48, 704)),
    "4+2": dict(padded=_bar(697, 695, 585, 0, 0, 807),
                memoized=_bar(755, 668, 560, 34, 65, 764)),
    "6": dict(padded=_bar(687, 882, 630, 0, 0, 939),
              memoized=_bar(818, 799, 600, 40, 75, 902)),
}
FIG10_ORDER = ["2+2+2", "3+3", "4+2", "6"]

# Fig 11 (artifact file bench_bricksize.csv): 3-layer 3-D conv chain on 224^3, absolute ms,
# keyed by the brick edge (bricks are cubes).
FIG11_EDGE = 224
FIG11_CUDNN = _bar(411, 507, 340, 0, 0, 578)
FIG11 = {
    4: dict(padded=_bar(415, 540, 370, 0, 0, 585),
            memoized=_bar(501, 480, 330, 40, 77, 534)),
    8: dict(padded=_bar(375, 475, 350, 0, 0, 500),
            memoized=_bar(431, 440, 320, 30, 56, 465)),
    16: dict(padded=_bar(360, 450, 330, 0, 0, 480),
             memoized=_bar(385, 400, 305, 17, 36, 427)),
    32: dict(padded=_bar(415, 515, 325, 0, 0, 605),
             memoized=_bar(410, 490, 310, 12, 25, 553)),
}


def memory_side(bar):
    """Total of the paper's M bar (idle + DRAM)."""
    return bar["idle"] + bar["dram"]


def compute_side(bar):
    """Total of the paper's C bar (compute + atomics + other)."""
    return (bar["compute"] + bar["atomics_compulsory"] + bar["atomics_conflict"]
            + bar["other"])
