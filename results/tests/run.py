"""ctest entry point: runs every results/ test, or exits 77 (ctest SKIP_RETURN_CODE) with the
reason when this Python lacks matplotlib or numpy."""
import os
import sys
import unittest

SKIP = 77


def main():
    missing = []
    for module in ("matplotlib", "numpy"):
        try:
            __import__(module)
        except ImportError:
            missing.append(module)
    if missing:
        print(f"figures_scripts: SKIPPED, {sys.executable} has no {', '.join(missing)} "
              "(install python3-matplotlib python3-numpy)")
        return SKIP
    here = os.path.dirname(os.path.abspath(__file__))
    suite = unittest.defaultTestLoader.discover(here, top_level_dir=here)
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
