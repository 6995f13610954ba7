"""How far the package is from ``mypy --strict``: the count of strict errors, per module.

Run: python tools/strict_count.py [--all]   (or: make strict-count)

The modules checked with --strict's flags in ``make test`` are listed in pyproject.toml
([[tool.mypy.overrides]]); this counts what is left in the whole package. It keeps its
own mypy cache (.mypy_cache/strict), apart from the everyday one.
"""

from __future__ import annotations

import argparse
import collections
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ERROR = re.compile(r"^(?P<path>[\w/.]+\.py):\d+: error: .*\[(?P<code>[\w-]+)\]$")


def strict_errors() -> list[tuple[str, str]]:
    """(module path, error code) of each strict error in the package."""
    run = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-pretty", "--no-error-summary",
         "--cache-dir", str(ROOT / ".mypy_cache" / "strict"), "empirical_batch"],
        cwd=ROOT, capture_output=True, text=True, check=False)
    if run.returncode not in (0, 1):  # 2: mypy itself failed
        sys.exit(run.stderr or run.stdout)
    return [(m["path"], m["code"]) for line in run.stdout.splitlines()
            if (m := ERROR.match(line))]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--all", action="store_true", help="every module, not the first 15")
    args = ap.parse_args(argv)
    errors = strict_errors()
    per_module = collections.Counter(path for path, _ in errors)
    per_code = collections.Counter(code for _, code in errors)
    for path, n in per_module.most_common(None if args.all else 15):
        print(f"{n:5d}  {path}")
    if len(per_module) > 15 and not args.all:
        print(f"       ... {len(per_module) - 15} more modules (--all)")
    print("  by code: " + ", ".join(f"{c} {n}" for c, n in per_code.most_common()))
    print(f"{len(errors)} strict errors in {len(per_module)} modules")
    return 0


if __name__ == "__main__":
    sys.exit(main())
