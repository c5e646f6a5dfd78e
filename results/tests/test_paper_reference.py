"""The typed paper table is internally consistent (catches typing mistakes)."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import paper_reference as ref  # noqa: E402


class PaperReferenceTest(unittest.TestCase):
    def test_fig7_totals_match_the_paper_text(self):
        # Totals quoted in the paper's text (BrickDL normalized to cuDNN).
        text = {"resnet50": 0.85, "drn_c_26": 0.915, "resnet3d_34": 0.87, "darknet53": 0.84,
                "vgg16_bn": 0.933, "deepcam": 0.86, "inception_v4": 0.895}
        self.assertEqual(sorted(ref.FIG7), sorted(ref.FIG7_ORDER))
        for name, row in ref.FIG7.items():
            self.assertAlmostEqual(row["cudnn_memory"] + row["cudnn_compute"], 1.0, msg=name)
            self.assertAlmostEqual(row["brickdl_memory"] + row["brickdl_compute"], text[name],
                                   msg=name)

    def test_fig8_bar_sides_agree(self):
        self.assertEqual(len(ref.FIG8), 7)
        for i, sub in enumerate(ref.FIG8):
            self.assertAlmostEqual(ref.memory_side(sub["cudnn"]), 1.0, msg=i)
            for key, bar in sub.items():
                self.assertAlmostEqual(ref.memory_side(bar), ref.compute_side(bar),
                                       msg=f"subgraph {i + 1} {key}")
        # The paper: padded wins subgraphs 1-2, memoized wins 3-7.
        for i, sub in enumerate(ref.FIG8):
            padded_wins = ref.memory_side(sub["padded"]) < ref.memory_side(sub["memoized"])
            self.assertEqual(padded_wins, i < 2, msg=i)

    def test_fig9_ranges_of_the_paper_text(self):
        # "L1/L2 transactions x1.01-1.35, DRAM x0.79-0.96".
        values = [v for sub in ref.FIG9 for s in ("padded", "memoized") for v in sub[s]]
        l12 = [v for sub in ref.FIG9 for s in sub for v in sub[s][:2]]
        dram = [sub[s][2] for sub in ref.FIG9 for s in sub]
        self.assertEqual(len(values), 42)
        self.assertEqual((min(l12), max(l12)), (1.01, 1.35))
        self.assertEqual((min(dram), max(dram)), (0.79, 0.96))

    def test_fig10_fig11_bar_sides_agree_and_match_the_text(self):
        self.assertEqual(ref.memory_side(ref.FIG10_CUDNN), 1440)
        self.assertEqual(ref.compute_side(ref.FIG10_CUDNN), 1440)
        for name, bars in ref.FIG10.items():
            for s, bar in bars.items():
                self.assertEqual(ref.memory_side(bar), ref.compute_side(bar), f"{name} {s}")
        self.assertEqual(ref.memory_side(ref.FIG10["3+3"]["memoized"]), 1310)
        # The artifact's Total row is shifted by one bar: its cuDNN entry is 2+2+2 padded's.
        self.assertEqual(ref.FIG10_CUDNN_TOTAL_ROW, ref.memory_side(ref.FIG10["2+2+2"]["padded"]))
        self.assertEqual(ref.memory_side(ref.FIG11_CUDNN), 918)
        self.assertEqual(ref.compute_side(ref.FIG11_CUDNN), 918)
        for edge, bars in ref.FIG11.items():
            for s, bar in bars.items():
                self.assertEqual(ref.memory_side(bar), ref.compute_side(bar), f"{edge} {s}")
        self.assertEqual(ref.memory_side(ref.FIG11[16]["memoized"]), 785)


if __name__ == "__main__":
    unittest.main()
