"""The framework baselines (experiments/baselines/) without a framework: they compile, their
model definitions match the published parameter and MAC counts, they refuse cleanly (exit 3,
nothing written) without PyTorch / JAX / a GPU, and their database rows are what the Fig 7
script reads."""
import os
import py_compile
import re
import sqlite3
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BASELINES = os.path.join(ROOT, "experiments", "baselines")
EXPERIMENTS = os.path.join(ROOT, "experiments")
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, BASELINES)

import common  # noqa: E402
import figdata as fd  # noqa: E402
import netdefs  # noqa: E402
import synthetic_db  # noqa: E402

SCRIPTS = ["pytorch_eager.py", "torch_compile.py", "jax_xla.py"]


def rounds_to(value, published, unit):
    """|value - published| within half a unit of the published figure's last digit."""
    return abs(value - published) <= unit / 2


class ScriptsCompileTest(unittest.TestCase):
    def test_every_baseline_file_compiles(self):
        files = [f for f in os.listdir(BASELINES) if f.endswith(".py")]
        self.assertGreaterEqual(len(files), 7)
        with tempfile.TemporaryDirectory() as tmp:
            for f in files:
                py_compile.compile(os.path.join(BASELINES, f), cfile=os.path.join(tmp, f + "c"),
                                   doraise=True)


class NetDefsTest(unittest.TestCase):
    """Against the same published figures as brickdl's zoo tests (tests/core/zoo_test.cpp)."""

    def test_resnet50_torchvision(self):
        # torchvision docs, ResNet50_Weights.IMAGENET1K_V1: num_params 25557032, GFLOPS 4.09
        # (conv + linear multiply-accumulates).
        n = netdefs.build("resnet50")
        self.assertEqual(n.total_params(), 25557032)
        self.assertTrue(rounds_to(n.total_macs(), 4.09e9, 0.01e9), n.total_macs())
        self.assertEqual(n.shape(n.output), (1000,))

    def test_vgg16_bn_torchvision(self):
        # torchvision docs, VGG16_BN_Weights.IMAGENET1K_V1: num_params 138365992, GFLOPS 15.47.
        n = netdefs.build("vgg16_bn")
        self.assertEqual(n.total_params(), 138365992)
        self.assertTrue(rounds_to(n.total_macs(), 15.47e9, 0.01e9), n.total_macs())

    def test_timm_and_paper_counts(self):
        # timm results tables: darknet53 41.61 M, inception_v4 42.68 M parameters; the DRN
        # README: DRN-C-26 21.1 M; Hara et al. 2018: 3-D ResNet-34 63.5 M with shortcut A,
        # which lacks the 173,824 parameters of shortcut B's three 1x1x1 convs + batch-norms
        # (64*128 + 128*256 + 256*512 weights, 2 * (128 + 256 + 512) batch-norm).
        self.assertTrue(rounds_to(netdefs.build("darknet53").total_params(), 41.61e6, 0.01e6))
        self.assertTrue(rounds_to(netdefs.build("inception_v4").total_params(), 42.68e6,
                                  0.01e6))
        self.assertTrue(rounds_to(netdefs.build("drn_c_26").total_params(), 21.1e6, 0.1e6))
        shortcut_b = 64 * 128 + 128 * 256 + 256 * 512 + 2 * (128 + 256 + 512)
        self.assertEqual(shortcut_b, 173824)
        self.assertTrue(rounds_to(netdefs.build("resnet3d_34").total_params() - shortcut_b,
                                  63.5e6, 0.1e6))

    def test_shapes_of_the_dense_models(self):
        n = netdefs.build("deepcam")
        self.assertEqual(n.shape(0), (16, 768, 1152))
        self.assertEqual(n.shape(n.output), (3, 768, 1152))
        n = netdefs.build("micro_graphsize")
        self.assertEqual(len(n.layers) - 1, 12)  # 6 x (conv, relu)
        # Each 3x3x3 conv, 3 -> 3 channels on 112^3: 112^3 * 3 * 3 * 27 MACs.
        self.assertEqual(n.total_macs(), 6 * 112 ** 3 * 3 * 3 * 27)
        n = netdefs.build("micro_bricksize", input_size=[32, 32, 32])
        self.assertEqual(n.total_macs(), 3 * 32 ** 3 * 3 * 3 * 27)

    def test_unknown_model(self):
        with self.assertRaisesRegex(KeyError, "resnet50"):
            netdefs.build("resnet51")

    def test_same_params_and_macs_as_the_zoo(self):
        """brickdl-tune --describe's totals for each paper model (skipped without the binary,
        whose path ctest passes in BRICKDL_TUNE)."""
        tune = os.environ.get("BRICKDL_TUNE", "")
        if not (tune and os.access(tune, os.X_OK)):
            self.skipTest("BRICKDL_TUNE does not name a brickdl-tune binary")
        for model in netdefs.MODELS:
            path = os.path.join(EXPERIMENTS, model + ".yaml")
            if not os.path.isfile(path):
                continue
            r = subprocess.run([tune, path, "--describe"], capture_output=True, text=True,
                               timeout=120)
            m = re.search(r"([\d,]+) params, ([\d,]+) MACs", r.stdout)
            if r.returncode != 0 or not m:
                self.skipTest(f"brickdl-tune --describe gave no totals line (rc {r.returncode})")
            batch = common.read_experiment(path).get("batch", 1)
            net = netdefs.build(model)
            params, zoo_macs = (int(g.replace(",", "")) for g in m.groups())
            self.assertEqual(params, net.total_params(), model)
            self.assertEqual(zoo_macs, batch * net.total_macs(), model)


class ExperimentFileTest(unittest.TestCase):
    def test_reads_the_shipped_experiments(self):
        e = common.read_experiment(os.path.join(EXPERIMENTS, "resnet50.yaml"))
        self.assertEqual((e["name"], e["model"], e["batch"], e["precision"]),
                         ("resnet50", "resnet50", 8, "fp32"))
        e = common.read_experiment(os.path.join(EXPERIMENTS, "deepcam.yaml"))
        self.assertEqual((e["model"], e["batch"]), ("deepcam", 1))

    def test_flow_lists_comments_and_errors(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "x.yaml")
            with open(path, "w") as f:
                f.write("model: micro_bricksize   # a chain\nbatch: 2\ninput_size: [32, 32, 32]\n"
                        "search:\n  brick_sizes: [4]\n")
            e = common.read_experiment(path)
            self.assertEqual((e["name"], e["batch"], e["input_size"]), ("x", 2, [32, 32, 32]))
            with open(path, "w") as f:
                f.write("model: {zoo: conv_chain, depth: 3}\n")
            with self.assertRaisesRegex(common.BaselineError, "not an inline graph"):
                common.read_experiment(path)
            with self.assertRaisesRegex(common.BaselineError, "cannot read"):
                common.read_experiment(os.path.join(tmp, "missing.yaml"))


FAKE_MISSING = "raise ImportError('not installed (test stand-in)')\n"
FAKE_TORCH_NO_GPU = ("class cuda:\n    @staticmethod\n    def is_available():\n"
                     "        return False\n")
FAKE_JAX_NO_GPU = ("def devices(kind=None):\n    raise RuntimeError('no gpu backend')\n")


class UnavailableTest(unittest.TestCase):
    """Stand-in `torch` / `jax` packages first on PYTHONPATH make the refusals deterministic,
    whatever is installed."""

    def run_script(self, script, fakes, tmp):
        for name, text in fakes.items():
            pkg = os.path.join(tmp, "fake", name)
            os.makedirs(pkg, exist_ok=True)
            with open(os.path.join(pkg, "__init__.py"), "w") as f:
                f.write(text)
            if name == "jax":
                with open(os.path.join(pkg, "numpy.py"), "w") as f:
                    f.write("")
        db = os.path.join(tmp, "out.db")
        env = dict(os.environ, PYTHONPATH=os.path.join(tmp, "fake"))
        r = subprocess.run([sys.executable, os.path.join(BASELINES, script),
                            os.path.join(EXPERIMENTS, "resnet50.yaml"), "--db", db],
                           capture_output=True, text=True, env=env, timeout=60)
        return r, db

    def test_missing_framework(self):
        cases = {"pytorch_eager.py": ("torch", "PyTorch is not installed"),
                 "torch_compile.py": ("torch", "PyTorch is not installed"),
                 "jax_xla.py": ("jax", "JAX is not installed")}
        for script, (module, message) in cases.items():
            with tempfile.TemporaryDirectory() as tmp:
                r, db = self.run_script(script, {module: FAKE_MISSING}, tmp)
                self.assertEqual(r.returncode, common.EXIT_UNAVAILABLE, script + r.stderr)
                self.assertIn(message, r.stderr)
                self.assertIn("no baseline written", r.stderr)
                self.assertFalse(os.path.exists(db), script)

    def test_no_gpu(self):
        cases = {"pytorch_eager.py": ("torch", FAKE_TORCH_NO_GPU, "PyTorch sees no CUDA GPU"),
                 "torch_compile.py": ("torch", FAKE_TORCH_NO_GPU, "PyTorch sees no CUDA GPU"),
                 "jax_xla.py": ("jax", FAKE_JAX_NO_GPU, "JAX sees no GPU")}
        for script, (module, text, message) in cases.items():
            with tempfile.TemporaryDirectory() as tmp:
                r, db = self.run_script(script, {module: text}, tmp)
                self.assertEqual(r.returncode, common.EXIT_UNAVAILABLE, script + r.stderr)
                self.assertIn(message, r.stderr)
                self.assertFalse(os.path.exists(db), script)

    def test_describe_needs_no_framework_and_bad_model_is_bad_input(self):
        with tempfile.TemporaryDirectory() as tmp:
            r = subprocess.run([sys.executable, os.path.join(BASELINES, "jax_xla.py"),
                                "--model", "vgg16_bn", "--describe"], capture_output=True,
                               text=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("138365992 params", r.stdout)
            r, _ = self.run_script("pytorch_eager.py", {}, tmp)
            r = subprocess.run([sys.executable, os.path.join(BASELINES, "pytorch_eager.py"),
                                "--model", "resnet51"], capture_output=True, text=True,
                               timeout=60)
            self.assertEqual(r.returncode, common.EXIT_BAD_INPUT)
            self.assertIn("unknown model 'resnet51'", r.stderr)


class DatabaseTest(unittest.TestCase):
    def test_statistics(self):
        st = common.summarize([4.0, 1.0, 3.0, 2.0, 5.0])
        self.assertEqual((st["median_ms"], st["min_ms"], st["max_ms"], st["p25_ms"],
                          st["p75_ms"]), (3.0, 1.0, 5.0, 2.0, 4.0))
        st = common.summarize([1.0, 2.0])
        self.assertEqual((st["median_ms"], st["p25_ms"], st["p75_ms"]), (1.5, 1.25, 1.75))

    def test_row_lands_on_the_tuners_target_and_in_fig7(self):
        with tempfile.TemporaryDirectory() as tmp:
            db = os.path.join(tmp, "tune.db")
            synthetic_db.build(db)
            fp = common.gpu_fingerprint("NVIDIA H200", cc="90", cuda="12.8")
            self.assertEqual(fp, "gpu:NVIDIA H200/sm90/cuda12.8")
            common.write_baseline(db, fp, "vgg16_bn", 8, "fp32", "jax-xla", [2.0, 4.0, 3.0])
            conn = sqlite3.connect(db)
            row = conn.execute("SELECT t.fingerprint, b.median_ms, b.p25_ms, b.samples_json "
                               "FROM baselines b JOIN targets t ON t.id = b.target_id WHERE "
                               "b.framework = 'jax-xla' AND b.model = 'vgg16_bn' AND "
                               "b.batch = 8 ORDER BY b.id DESC LIMIT 1").fetchone()
            conn.close()
            # The tuner's full fingerprint of the same GPU name is reused.
            self.assertEqual(row, (synthetic_db.GPU_TARGET, 3.0, 2.5, "[2.0, 4.0, 3.0]"))
            conn = fd.open_db(db)
            m = fd.fig7_data(conn, ["vgg16_bn"])["vgg16_bn"]
            conn.close()
            # Measured layerwise of vgg16_bn in the synthetic database: 8 ms.
            self.assertAlmostEqual(m.baselines["jax-xla"]["normalized"], 3.0 / 8)

    def test_new_database_is_created_from_the_schema(self):
        with tempfile.TemporaryDirectory() as tmp:
            db = os.path.join(tmp, "new.db")
            common.write_baseline(db, "gpu:Some GPU", "resnet50", 1, "fp16", "pytorch-eager",
                                  [1.0])
            conn = fd.open_db(db)  # a valid brickdl database for the figure scripts
            self.assertEqual([tuple(r) for r in conn.execute(
                "SELECT fingerprint, backend FROM targets").fetchall()],
                             [("gpu:Some GPU", "cuda")])
            conn.close()

    def test_refuses_a_foreign_database(self):
        with tempfile.TemporaryDirectory() as tmp:
            db = os.path.join(tmp, "foreign.db")
            conn = sqlite3.connect(db)
            conn.execute("CREATE TABLE meta (key TEXT, value TEXT)")
            conn.commit()
            conn.close()
            with self.assertRaisesRegex(common.BaselineError, "not a brickdl tuning database"):
                common.write_baseline(db, "gpu:X", "resnet50", 1, "fp32", "jax-xla", [1.0])


if __name__ == "__main__":
    unittest.main()
