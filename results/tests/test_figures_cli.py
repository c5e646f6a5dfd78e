"""The figure command end to end: every figure as PNG and PDF, on synthetic and empty data."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import synthetic_db  # noqa: E402
import test_figdata  # noqa: E402

FIGURES = ["fig7_models", "fig8_resnet50_subgraphs", "fig9_resnet50_transactions",
           "fig10_graphsize", "fig11_bricksize", "fig12_model_accuracy"]


def run_figures(*args):
    return subprocess.run([sys.executable, os.path.join(RESULTS, "figures.py"), *args],
                          capture_output=True, text=True, timeout=120)


class FiguresCliTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def assertAllFigures(self, outdir, formats=("png", "pdf")):
        for name in FIGURES:
            for ext in formats:
                path = os.path.join(outdir, f"{name}.{ext}")
                self.assertTrue(os.path.isfile(path), path)
                self.assertGreater(os.path.getsize(path), 1000, path)
        with open(os.path.join(outdir, FIGURES[0] + ".png"), "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
        if "pdf" in formats:
            with open(os.path.join(outdir, FIGURES[0] + ".pdf"), "rb") as f:
                self.assertEqual(f.read(5), b"%PDF-")

    def test_synthetic_database_gives_every_figure_and_its_numbers(self):
        db = os.path.join(self.tmp.name, "synthetic.db")
        synthetic_db.build(db)
        out = os.path.join(self.tmp.name, "figs")
        r = run_figures(db, out)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertAllFigures(out)
        with open(os.path.join(out, "figures.json")) as f:
            summary = json.load(f)
        self.assertAlmostEqual(summary["fig7"]["vgg16_bn"]["plan"]["total"], 0.5)
        self.assertEqual(summary["fig8_9"]["subgraphs"][0]["label"], "subgraph 2")
        self.assertEqual(summary["fig12"]["points"], 15)
        # Both comparisons: against U next to against L.
        self.assertAlmostEqual(summary["fig7"]["resnet50"]["against_unfused"]["normalized"]
                               ["plan"]["total"], 5 / 12)
        self.assertEqual([p["run"]["backend"] for p in summary["fig11"]["panels"]],
                         ["cuda", "none"])
        self.assertEqual(sorted(summary["model_vs_paper"]),
                         ["Fig 10", "Fig 11", "Fig 7", "Fig 8"])
        row = next(r for r in summary["model_vs_paper"]["Fig 8"]
                   if r["bar"] == "subgraph 2 · memoized")
        self.assertEqual((row["vs_l"], row["vs_u"]), (0.75, 9 / 16))
        self.assertEqual(summary["layout_problems"], {})
        with open(os.path.join(out, "model_vs_paper.md")) as f:
            table = f.read()
        self.assertIn("| subgraph 2 · memoized | 0.830 | 0.750 CPU | 0.562 model | -0.267 |",
                      table)

    def test_schema4_database_draws_and_says_the_paper_baseline_is_absent(self):
        src, db = (os.path.join(self.tmp.name, n) for n in ("s5.db", "s4.db"))
        synthetic_db.build(src)
        test_figdata.schema4_copy(src, db)
        out = os.path.join(self.tmp.name, "figs4")
        r = run_figures(db, out, "--formats", "png")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertAllFigures(out, formats=("png",))
        with open(os.path.join(out, "figures.json")) as f:
            summary = json.load(f)
        self.assertEqual(summary["layout_problems"], {})
        self.assertIsNone(summary["fig7"]["resnet50"]["against_unfused"])
        with open(os.path.join(out, "model_vs_paper.md")) as f:
            self.assertIn("this database (schema version 4) has no baseline_predictions",
                          f.read())

    def test_empty_database_still_draws_every_figure_with_the_paper_panel(self):
        db = os.path.join(self.tmp.name, "empty.db")
        synthetic_db.build_empty(db)
        out = os.path.join(self.tmp.name, "figs")
        r = run_figures(db, out, "--formats", "png")  # PNG only: keeps the suite quick
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertAllFigures(out, formats=("png",))
        with open(os.path.join(out, "figures.json")) as f:
            self.assertEqual(json.load(f)["layout_problems"], {})
        self.assertNotIn("warning", r.stderr)
        self.assertFalse(any(f.endswith(".pdf") for f in os.listdir(out)))

    def test_only_and_bad_input(self):
        db = os.path.join(self.tmp.name, "synthetic.db")
        synthetic_db.build(db)
        out = os.path.join(self.tmp.name, "only")
        r = run_figures(db, out, "--only", "fig10")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(sorted(f for f in os.listdir(out) if f.startswith("fig")),
                         ["fig10_graphsize.pdf", "fig10_graphsize.png", "figures.json"])
        r = run_figures(db, out, "--only", "fig13")
        self.assertEqual(r.returncode, 2)
        self.assertIn("unknown figure(s) fig13", r.stderr)
        r = run_figures(os.path.join(self.tmp.name, "missing.db"), out)
        self.assertEqual(r.returncode, 2)
        self.assertIn("no such database file", r.stderr)

    def test_wrapper_script(self):
        db = os.path.join(self.tmp.name, "synthetic.db")
        synthetic_db.build(db)
        out = os.path.join(self.tmp.name, "wrapped")
        r = subprocess.run([os.path.join(RESULTS, "brickdl-figures"), db, out, "--only",
                            "fig11"], capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(os.path.isfile(os.path.join(out, "fig11_bricksize.pdf")))


if __name__ == "__main__":
    unittest.main()
