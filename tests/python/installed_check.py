"""ctest python_installed: the package `pip install .` installed into this interpreter
(scripts/python-install.sh) runs the README's one-liner, from a folder outside the checkout and
without the build tree on the path, and prints the figure brickdl-tune prints.

    installed_check.py BUILD/python/brickdl BUILD/apps

Exit 0: it does; 1: it does not; 77 (skipped): no brickdl is installed in this interpreter, or
the installed one is not this build's (other Python files, or an extension module of another size
or older than the build tree's).
"""
import glob
import hashlib
import importlib.util
import os
import subprocess
import sys
import tempfile

ONE_LINER = ("import brickdl; print(brickdl.tune(brickdl.Model.zoo('resnet50', batch=8), "
             "target='H200', precision='tf32', backend='none').speedup)")


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def same_build(built, installed, module, installed_module):
    """The installed package is this build's: the same Python files, and an extension module
    of the same size installed no earlier than it was built (installing rewrites its RPATH, so
    the bytes differ)."""
    for name in os.listdir(built):
        if name.endswith(".py") and (
                not os.path.exists(os.path.join(installed, name)) or
                digest(os.path.join(built, name)) != digest(os.path.join(installed, name))):
            return False
    a, b = os.stat(module), os.stat(installed_module)
    return a.st_size == b.st_size and b.st_mtime >= a.st_mtime - 1


def main():
    built, apps = sys.argv[1], sys.argv[2]
    spec = importlib.util.find_spec("brickdl")
    if spec is None or not spec.submodule_search_locations:
        print("python_installed: brickdl is not installed in", sys.executable,
              "(scripts/python-install.sh installs it); skipped")
        return 77
    installed = list(spec.submodule_search_locations)[0]
    mine = glob.glob(os.path.join(built, "_brickdl*.so"))
    theirs = glob.glob(os.path.join(installed, "_brickdl*.so"))
    if os.path.realpath(installed) == os.path.realpath(built):
        print("python_installed: brickdl resolves to the build tree, not an installed copy")
        return 1
    if len(mine) != 1 or len(theirs) != 1 or not same_build(built, installed, mine[0],
                                                            theirs[0]):
        print(f"python_installed: the brickdl installed at {installed} is not this build's "
              "(scripts/python-install.sh installs it); skipped")
        return 77
    with tempfile.TemporaryDirectory() as tmp:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        py = subprocess.run([sys.executable, "-c", ONE_LINER], capture_output=True, text=True,
                            cwd=tmp, env=env, timeout=300)
        if py.returncode != 0:
            print("python_installed: the one-liner failed:\n" + py.stderr)
            return 1
        cli = subprocess.run([os.path.join(apps, "brickdl-tune"), "resnet50", "--batch", "8",
                              "--target", "H200", "--precision", "tf32", "--backend", "none",
                              "--db", "cli.db", "--out", "cli"], capture_output=True, text=True,
                             cwd=tmp, timeout=300)
    line = [ln for ln in cli.stdout.splitlines() if ln.startswith("end to end (model):")]
    if cli.returncode != 0 or not line:
        print("python_installed: brickdl-tune failed:\n" + cli.stderr)
        return 1
    want = line[0].rsplit("speedup ", 1)[1].rstrip("x")
    got = float(py.stdout)
    print(f"python_installed: {installed}: the one-liner printed {py.stdout.strip()}; "
          f"brickdl-tune: speedup {want}x")
    return 0 if f"{got:.3f}" == want else 1


if __name__ == "__main__":
    sys.exit(main())
