"""What the drawn figures show (figures.FIGURE_FACTS): every line and marker has a legend
entry, no text is cut, missing bars give their full reasons, Fig 9 keeps the paper's linear
axis, subtitles say which baseline and where model and paper disagree. The figures are
drawn once, in process, from the synthetic database."""
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import figures  # noqa: E402
import synthetic_db  # noqa: E402


class FigureFactsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        db = os.path.join(cls.tmp.name, "synthetic.db")
        synthetic_db.build(db)
        formats = list(figures.FORMATS)
        figures.FORMATS[:] = ["png"]
        try:
            cls.written, cls.summary = figures.make_figures(db, os.path.join(cls.tmp.name, "f"))
        finally:
            figures.FORMATS[:] = formats
        cls.facts = dict(figures.FIGURE_FACTS)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def legend(self, fig, axes):
        return self.facts[figures.FIGURES[fig]]["axes"][axes]["legend"]

    def test_every_figure_drawn_without_layout_problems(self):
        self.assertEqual(sorted(self.facts), sorted(figures.FIGURES.values()))
        for name, facts in self.facts.items():
            self.assertEqual(facts["problems"], [], name)

    def test_baseline_lines_and_paper_markers_have_legend_entries(self):
        diamond_l = figures.PAPER_VALUE_NOT_L
        diamond_u = "paper's value (A100-40GB),\nnormalized to its cuDNN"
        paper_cudnn = "cuDNN (the paper's,\nunfused: U)"
        for fig in ("fig7", "fig8"):
            self.assertIn("L = 1", self.legend(fig, 0))
            self.assertIn(diamond_l, self.legend(fig, 0))
            self.assertIn("U = 1", self.legend(fig, 1))
            self.assertIn(diamond_u, self.legend(fig, 1))
        self.assertIn("cuDNN = 1", self.legend("fig7", 2))
        self.assertIn(paper_cudnn + " = 1", self.legend("fig8", 2))
        # Fig 10: one panel of ours with both baselines' lines, then the paper's.
        self.assertEqual(len(self.facts[figures.FIGURES["fig10"]]["axes"]), 2)
        for fig, ours in (("fig10", [0]), ("fig11", [0, 1])):
            for i in ours:
                self.assertIn("L: layerwise, cuDNN fused", self.legend(fig, i))
                self.assertIn("U: the paper's unfused cuDNN", self.legend(fig, i))
            self.assertIn(paper_cudnn, self.legend(fig, ours[-1] + 1))

    def test_fig9_keeps_the_papers_linear_axis_and_writes_cut_bars(self):
        axes = self.facts[figures.FIGURES["fig9"]]["axes"]
        for ax in axes:
            self.assertEqual(ax["yscale"], "linear")
        # Subgraph 10's padded L1 ratio is 50 / 10 = 5: cut at the cap, its value written.
        self.assertLessEqual(axes[0]["ylim"][1], figures.FIG9_CAP)
        self.assertIn("5.00", axes[0]["texts"])
        self.assertIn(f"cut at {figures.FIG9_CAP}", axes[0]["title"])
        self.assertEqual(axes[2]["ylim"], [0.0, 1.6])  # the paper's own range

    def test_missing_bars_give_their_full_reason_in_a_footnote(self):
        facts = self.facts[figures.FIGURES["fig11"]]
        reason = "infeasible: " + synthetic_db.FIG11_INFEASIBLE
        self.assertIn(reason, facts["footnotes"])
        tag = f"no bar [{facts['footnotes'].index(reason) + 1}]"
        self.assertIn(tag, facts["axes"][1]["texts"])  # the model panel's padded 16^3
        self.assertIn("ours, model, A100-40GB model spec, 224x224x224 (the paper's size)",
                      facts["axes"][1]["title"])
        fig8 = self.facts[figures.FIGURES["fig8"]]
        self.assertTrue(any("no 'paper-unfused' row" in f for f in fig8["footnotes"]))

    def test_subtitles_name_both_baselines_and_say_where_model_and_paper_disagree(self):
        for fig in ("fig7", "fig8", "fig9", "fig10", "fig11"):
            text = self.facts[figures.FIGURES[fig]]["subtitle"].replace("\n", " ")
            self.assertIn("L = our layerwise baseline, cuDNN fused", text, fig)
            self.assertIn("U = the paper's own cuDNN baseline", text, fig)
            self.assertIn("model vs paper:", text, fig)
        fig7 = self.facts[figures.FIGURES["fig7"]]["subtitle"].replace("\n", " ")
        # Against L: resnet50 5 / 6, vgg16_bn 4 / 8; against U (model): 5 / 12 and 5 / 9.
        self.assertIn("the plan is 0.50-0.83 of L (GPU/model; all below the paper's "
                      "0.85-0.93 of its cuDNN)", fig7)
        self.assertIn("Against U (middle panel) the plan is 0.42-0.56 (model;", fig7)

    def test_the_check_itself_finds_cut_text_and_unexplained_lines(self):
        fig, (ax,) = figures._panels(1, 4, 2)
        fig.subplots_adjust(left=0.25, right=0.7, bottom=0.2, top=0.9)
        ax.bar([0], [1], color="#123456")
        ax.axhline(1, color="black", linestyle="--")
        ax.plot([0], [1], **figures.DIAMOND)
        figures._separator(ax, 0.5)  # a separator needs no legend entry
        ax.legend(handles=[figures._diamond_entry("paper")])
        fig.text(1.05, 0.5, "outside")
        problems = figures.layout_problems(fig)
        figures.plt.close(fig)
        self.assertEqual(len(problems), 3, problems)
        self.assertTrue(any("'outside'" in p for p in problems))
        self.assertTrue(any("line or marker without a legend entry" in p for p in problems))
        self.assertTrue(any("bar colour without a legend entry" in p for p in problems))


if __name__ == "__main__":
    unittest.main()
