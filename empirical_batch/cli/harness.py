"""`empirical-batch harness`: the validation harness (real training against the noise scale).

The harness is `empirical_batch.harness` (it needs torch, and scikit-learn for the
digits task); this command runs its stages. A device that is not there (``--device
cuda`` without CUDA) is a user error, reported in one line.
"""

from __future__ import annotations

import contextlib

from ..errors import InputError
from .devices import check_device
from .output import command


def _import_harness():
    # without torch, the harness package raises MissingDependencyError naming the extra
    from empirical_batch.harness import config, distribute, sweep, trainer
    from empirical_batch.validation import study

    return config, study, sweep, distribute, trainer


def add_parser(subparsers, name: str, help_text: str) -> None:
    p = subparsers.add_parser(name, help=help_text, description=help_text)
    p.add_argument("--config", default="tiny", choices=("tiny", "cpu", "full"),
                   help="preset: tiny (CI, < 2 min on a CPU), cpu (a few minutes), full (GPU)")
    p.add_argument("--tasks", nargs="+", default=None, metavar="TASK",
                   help="restrict to these tasks (teacher_student, digits, sequence, text_lm)")
    p.add_argument("--shard", default=None, metavar="i/n",
                   help="run only shard i of n of the sweep (implies --stage sweep)")
    p.add_argument("--shard-by", default="runs", choices=("runs", "groups"),
                   help="how --shard i/n splits the sweep: runs (every n-th run, default) or "
                        "groups (whole vmap groups, one batch size each, "
                        "balanced by run-steps: the merged shards equal the unsharded sweep "
                        "bit for bit; n at most the number of groups)")
    p.add_argument("--executor", default=None, metavar="ENGINE:WHERE",
                   help="run the sweep's shards (whole vmap groups) through an executor and "
                        "write the unsharded sweep, equal to the sequential run's: process:N "
                        "(N local processes), dask:ADDRESS (a Dask scheduler, e.g. "
                        "dask:tcp://host:8786) or dask:local[:N] (start a local cluster), "
                        "ray:auto (a running Ray cluster), ray:ADDRESS or ray:local[:N]; "
                        "Dask and Ray need pip install 'empirical_batch[distributed]'. "
                        "Slurm arrays need none: use --shard $SLURM_ARRAY_TASK_ID/"
                        "$SLURM_ARRAY_TASK_COUNT")
    p.add_argument("--stage", default=None, choices=("all", "sweep", "analyze", "report"),
                   help="sweep only, analysis of existing sweeps only, or both (default); "
                        "report: targets, fits, claims and report again from an earlier "
                        "analysis's measured tables (no training, no GPU)")
    p.add_argument("--out", default="out/harness", help="output folder (default out/harness)")
    p.add_argument("--device", default="auto", help="auto (CUDA when available), cpu or cuda")
    p.add_argument("--threads", type=int, default=None,
                   help="torch CPU threads (default 1 on the CPU: the models are tiny and "
                        "intra-op threading costs more than it saves)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.add_argument("--no-cuda-graphs", action="store_true",
                   help="on CUDA, run each vmap group's training step eagerly instead of "
                        "capturing it in a CUDA graph and replaying it (the default); "
                        "sets EMPIRICAL_BATCH_CUDA_GRAPHS=0, which the command's local "
                        "worker processes inherit (remote Dask or Ray workers need it "
                        "set in their own environment)")
    p.add_argument("--overwrite", action="store_true",
                   help="write into --out even if it holds another configuration's results "
                        "(removes only the files its manifests list) or files of your own "
                        "(kept; a file of yours the harness would write is refused)")
    p.add_argument("--time-budget", type=float, default=None, metavar="SECONDS",
                   help="stop cleanly between units (sweep groups; per task the reference "
                        "runs, one-step and branched training) when the next would not fit "
                        "in SECONDS of wall time; exit 0, print what remains and the "
                        "command that continues (finished units are kept and reused)")
    p.set_defaults(run=command(run))


def run(args) -> int:
    config_mod, study, sweep, distribute, trainer = _import_harness()
    check_device(args.device)
    shard = sweep.parse_shard(args.shard)
    stage = args.stage or ("sweep" if args.shard else "all")
    engine = None if args.executor is None else distribute.parse_executor(args.executor)
    if engine is not None and (args.shard or stage in ("analyze", "report")):
        raise InputError("--executor runs the sweep stage, all of its shards: do not combine "
                         f"it with --shard i/n or --stage {stage}")
    config = config_mod.get_config(args.config, args.tasks)
    command = f"empirical-batch harness --config {args.config}"
    if args.tasks:
        command += " --tasks " + " ".join(args.tasks)
    if args.shard:
        command += f" --shard {args.shard}"
        if args.shard_by != "runs":
            command += f" --shard-by {args.shard_by}"
    if engine is not None:
        command += f" --executor {args.executor}"
    command += f" --stage {stage} --out {args.out} --device {args.device}"
    if args.threads:
        command += f" --threads {args.threads}"
    if args.no_cuda_graphs:
        command += " --no-cuda-graphs"
    if args.time_budget is not None:
        command += f" --time-budget {args.time_budget:g}"
    with contextlib.ExitStack() as stack:
        if args.no_cuda_graphs:
            stack.enter_context(trainer.cuda_graphs_setting(False))
        executor = (None if engine is None else
                    stack.enter_context(distribute.open_executor(engine, device=args.device)))
        result = study.run_study(
            config, args.out, stage=stage, shard=shard, device=args.device,
            progress=not args.no_progress, threads=args.threads, command=command,
            overwrite=args.overwrite, executor=executor, split=args.shard_by,
            time_budget=args.time_budget,
        )
    for f in result.files:
        print(f)
    print(f"harness {config.name} on {result.device}: " + ", ".join(
        f"{k} {v:.1f} s" for k, v in result.wall_s.items()))
    if not result.complete:
        print(f"time budget of {args.time_budget:g} s spent; finished work is kept in "
              f"{args.out}. Remaining ({len(result.remaining)}):")
        for item in result.remaining:
            print(f"  {item}")
        print(f"continue with: {command}")
    return 0
