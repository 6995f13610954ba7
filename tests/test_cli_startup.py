"""`empirical-batch --help` (and each command's) starts without the heavy libraries.

pandas, matplotlib, scipy and torch are imported by the commands that use them, when
they run, not to print help: the start-up of ``--help`` is then the interpreter, numpy
and the argument parser (benchmarks/bench_startup.py times it).
"""

from __future__ import annotations

import json
import subprocess
import sys

from empirical_batch.cli import COMMANDS

HEAVY = ("pandas", "matplotlib", "scipy", "torch")

# one fresh interpreter; after each --help, the heavy modules loaded so far (they only
# accumulate, so the first command that lists one is the command that imported it)
_SCRIPT = """\
import contextlib, io, json, sys
from empirical_batch.cli import main
seen = {}
for argv in %r:
    with contextlib.redirect_stdout(io.StringIO()) as out:
        try:
            main(argv)
        except SystemExit as exc:
            assert exc.code == 0, (argv, exc.code)
    assert "usage: empirical-batch" in out.getvalue(), argv
    seen[" ".join(argv)] = sorted(m for m in %r if m in sys.modules)
print(json.dumps(seen))
"""


def test_help_imports_no_heavy_library():
    argvs = [["--help"]] + [[name, "--help"] for name in COMMANDS]
    run = subprocess.run([sys.executable, "-c", _SCRIPT % (argvs, HEAVY)],
                         capture_output=True, text=True, check=True)
    seen = json.loads(run.stdout)
    assert list(seen) == [" ".join(a) for a in argvs]
    assert {argv: mods for argv, mods in seen.items() if mods} == {}


def test_the_check_sees_an_import():
    """The same script flags a command whose help imports pandas (the check can fail)."""
    script = _SCRIPT.replace("from empirical_batch.cli import main",
                             "from empirical_batch.cli import main as _main\n"
                             "def main(argv):\n"
                             "    import pandas  # noqa: F401\n"
                             "    _main(argv)")
    run = subprocess.run([sys.executable, "-c", script % ([["fit", "--help"]], HEAVY)],
                         capture_output=True, text=True, check=True)
    assert json.loads(run.stdout) == {"fit --help": ["pandas"]}
