"""`empirical-batch harness`: the validation harness (real training against the noise scale).

The harness lives in ``analysis/harness`` of the source checkout, not in the installed
package; this command finds it next to the package (an editable install or a run from
the checkout) and says so clearly when it is absent.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path


def _checkout_root() -> Path:
    return Path(__file__).resolve().parents[2]


def _import_harness():
    root = _checkout_root()
    if not (root / "analysis" / "harness" / "__init__.py").is_file():
        raise FileNotFoundError(
            f"the validation harness is not installed: expected analysis/harness/ in the source "
            f"checkout at {root}. Run from a clone of the repository (pip install -e .)."
        )
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    try:
        import torch  # noqa: F401
    except ImportError:  # pragma: no cover - torch is a dev dependency
        raise FileNotFoundError(
            "the harness needs torch: pip install 'empirical_batch[torch]'"
        ) from None
    return (importlib.import_module("analysis.harness.config"),
            importlib.import_module("analysis.harness.pipeline"),
            importlib.import_module("analysis.harness.sweep"))


def add_parser(subparsers, name: str, help_text: str) -> None:
    p = subparsers.add_parser(name, help=help_text, description=help_text)
    p.add_argument("--config", default="tiny", choices=("tiny", "cpu", "full"),
                   help="preset: tiny (CI, < 2 min on a CPU), cpu (a few minutes), full (GPU)")
    p.add_argument("--tasks", nargs="+", default=None, metavar="TASK",
                   help="restrict to these tasks (teacher_student, digits, sequence)")
    p.add_argument("--shard", default=None, metavar="i/n",
                   help="run only shard i of n of the sweep (implies --stage sweep)")
    p.add_argument("--stage", default=None, choices=("all", "sweep", "analyze"),
                   help="sweep only, analysis of existing sweeps only, or both (default)")
    p.add_argument("--out", default="out/harness", help="output folder (default out/harness)")
    p.add_argument("--device", default="auto", help="auto (CUDA when available), cpu or cuda")
    p.add_argument("--threads", type=int, default=None,
                   help="torch CPU threads (default 1 on the CPU: the models are tiny and "
                        "intra-op threading costs more than it saves)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.set_defaults(run=run)


def run(args) -> int:
    config_mod, pipeline, sweep = _import_harness()
    shard = sweep.parse_shard(args.shard)
    stage = args.stage or ("sweep" if args.shard else "all")
    config = config_mod.get_config(args.config, args.tasks)
    command = f"empirical-batch harness --config {args.config}"
    if args.tasks:
        command += " --tasks " + " ".join(args.tasks)
    if args.shard:
        command += f" --shard {args.shard}"
    command += f" --stage {stage} --out {args.out} --device {args.device}"
    if args.threads:
        command += f" --threads {args.threads}"
    result = pipeline.run_harness(
        config, args.out, stage=stage, shard=shard, device=args.device,
        progress=not args.no_progress, threads=args.threads, command=command,
    )
    for f in result.files:
        print(f)
    print(f"harness {config.name} on {result.device}: " + ", ".join(
        f"{k} {v:.1f} s" for k, v in result.wall_s.items()))
    return 0
