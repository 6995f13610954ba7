"""Start-up of the ``empirical-batch`` command: CPU time of ``--help``; prints a table.

Each row runs ``empirical-batch [COMMAND] --help`` in a fresh interpreter ``--runs``
times (the command's ``main`` called as the console script calls it) and reports the
median and minimum CPU time (user + system) per run, and which heavy libraries
(numpy, pandas, scipy, matplotlib, torch, sympy) the run imported. CPU time, not wall
time, so that other load on the host inflates the numbers less; the interpreter's own
start-up (``python -c pass``) is the control row.

``--src DIR`` imports ``empirical_batch`` from another checkout (e.g. an older commit
unpacked with ``git archive <commit> empirical_batch | tar -x -C DIR``), to compare.

Run: python benchmarks/bench_startup.py [--runs 10] [--src DIR]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("numpy", "pandas", "scipy", "matplotlib", "torch", "sympy")
COMMANDS = ("", "fit", "simulate", "plan", "harness", "schedule", "transfer", "law", "data",
            "demo")

_CHILD = """\
import sys
sys.path.insert(0, {src!r})
import contextlib, io, json
import empirical_batch
assert empirical_batch.__file__.startswith({src!r}), empirical_batch.__file__
from empirical_batch.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    try:
        main({argv!r})
    except SystemExit:
        pass
print(json.dumps(sorted(m for m in {heavy!r} if m in sys.modules)))
"""


def cpu_of(code: str) -> tuple[float, str]:
    """CPU seconds (user + system) of one ``python -c code`` and its stdout."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, out.stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--src", default=str(ROOT), help="checkout whose empirical_batch to import")
    args = ap.parse_args()
    src = str(Path(args.src).resolve())
    print(f"empirical_batch from {src}; {args.runs} runs per row, CPU ms per run")
    print(f"{'command':<32} {'median':>8} {'min':>8}  heavy imports")
    rows = [("python -c pass (control)", "pass")]
    rows += [(f"empirical-batch {c} --help".replace("  ", " "),
              _CHILD.format(src=src, argv=[*c.split(), "--help"], heavy=HEAVY))
             for c in COMMANDS]
    for label, code in rows:
        cpu_of(code)  # warm the file cache (and bytecode of the checkout, if writable)
        times, imported = [], ""
        for _ in range(args.runs):
            t, out = cpu_of(code)
            times.append(1e3 * t)
            imported = ", ".join(json.loads(out)) if out.strip() else "-"
        print(f"{label:<32} {statistics.median(times):8.0f} {min(times):8.0f}  {imported}")


if __name__ == "__main__":
    main()
