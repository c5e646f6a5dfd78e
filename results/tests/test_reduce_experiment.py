"""reduce_experiment.set_key: sets keys of an experiment file, keeps the rest byte for byte."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from reduce_experiment import set_key  # noqa: E402

TEXT = """# a comment
name: micro
model: micro_bricksize
search:
  brick_sizes: [4, 8]   # bricks
  partitions:
    - [3]
  threads: [256]

# measurement settings
measurement:
  backend: auto
  repetitions: 10
seed: 1
"""


class SetKeyTest(unittest.TestCase):
    def test_replace_nested_keeps_everything_else(self):
        out = set_key(TEXT, "measurement.repetitions", "3")
        self.assertEqual(out, TEXT.replace("  repetitions: 10", "  repetitions: 3"))

    def test_replace_nested_with_continuation_lines(self):
        out = set_key(TEXT, "search.partitions", "[[3]]")
        self.assertEqual(out, TEXT.replace("  partitions:\n    - [3]\n", "  partitions: [[3]]\n"))

    def test_add_nested_top_level_and_new_block(self):
        out = set_key(TEXT, "measurement.warmup", "1")
        self.assertIn("  repetitions: 10\n  warmup: 1\nseed: 1\n", out)
        out = set_key(TEXT, "search.searcher", "measure_all")
        self.assertIn("  threads: [256]\n  searcher: measure_all\n\n# measurement", out)
        out = set_key(TEXT, "input_size", "[64, 64, 64]")
        self.assertTrue(out.endswith("seed: 1\ninput_size: [64, 64, 64]\n"))
        out = set_key(TEXT, "seed", "7")
        self.assertEqual(out, TEXT.replace("seed: 1", "seed: 7"))
        out = set_key(TEXT, "target.gpu", "H200")
        self.assertTrue(out.endswith("target:\n  gpu: H200\n"))

    def test_refusals(self):
        with self.assertRaisesRegex(ValueError, "one line"):
            set_key("target: {gpu: A100-40GB}\n", "target.gpu", "H200")
        with self.assertRaisesRegex(ValueError, "KEY or KEY.SUBKEY"):
            set_key(TEXT, "a.b.c", "1")


if __name__ == "__main__":
    unittest.main()
