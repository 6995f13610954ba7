"""Where the validation study's analysis spends its time: the report stage, cold and cached.

Runs ``empirical-batch harness --stage report`` (`empirical_batch.validation.study.run_study`)
on a copy of a committed harness folder (default ``data/harness`` with the ``cpu``
preset; ``--folder data/harness-full`` uses the configuration its sweeps were made with,
as ``analysis/harness/report_harness_full.py`` does) twice: first with an empty
analysis cache (every fit computed), then again (every task's fits read from
``OUT/cache``). It prints the wall time of each run and the time of the seed
bootstrap of B_crit's growth (`empirical_batch.validation.uncertainty`, 200 refits
per task and optimizer, the largest part of a cold run) in two ways on the same
draws: each draw revalidated by ``load_sweep`` and split again (``resample_seeds``),
and split once (``SeedPool``), with the check that both give the same intervals.
Each of these is also timed a second time (the control rows: the cold run with the
cache emptied again, the ``SeedPool`` bootstrap again), so that a reader can tell a
difference between rows from the machine's noise.

    python benchmarks/bench_report.py                              # data/harness, cpu preset
    python benchmarks/bench_report.py --folder data/harness-full   # the full preset's two tasks
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _config(folder: str):
    from empirical_batch.harness.config import get_config

    if Path(folder).name == "harness-full":  # its sweeps: two tasks, no branched training
        config = get_config("full", ["teacher_student", "digits"])
        return dataclasses.replace(config, plans=tuple(
            dataclasses.replace(p, branched=None) for p in config.plans))
    return get_config("cpu")


def _bootstrap_both_ways(config, out: Path, n_boot: int) -> tuple[float, float, float]:
    import numpy as np

    from empirical_batch.fit.targets import choose_targets
    from empirical_batch.harness.sweep import load_sweeps, sweep_files
    from empirical_batch.sweeps import load_sweep
    from empirical_batch.validation.curves import b_crit_points, select
    from empirical_batch.validation.uncertainty import SeedPool, resample_seeds

    slow = fast = again = 0.0
    for plan in config.plans:
        sweep = load_sweeps(sweep_files(out, plan.task))
        for opt in plan.sweep.optimizers:
            sub = select(sweep, optimizer=opt)
            frame = sub.to_frame()
            if frame.groupby("batch_size")["seed"].nunique().min() < 2:
                continue  # one seed: no bootstrap
            targets = choose_targets(frame, config.target_fractions)
            t0 = time.perf_counter()
            rng = np.random.default_rng(0)
            a = [b_crit_points(load_sweep(resample_seeds(frame, rng)), targets)
                 for _ in range(n_boot)]
            t1 = time.perf_counter()
            rng, pool = np.random.default_rng(0), SeedPool(frame)
            b = [b_crit_points(pool.sweep(pool.draw(rng)), targets) for _ in range(n_boot)]
            t2 = time.perf_counter()
            rng, pool = np.random.default_rng(0), SeedPool(frame)  # the control
            c = [b_crit_points(pool.sweep(pool.draw(rng)), targets) for _ in range(n_boot)]
            t3 = time.perf_counter()
            np.testing.assert_array_equal(np.array(a), np.array(b))  # the same refits
            np.testing.assert_array_equal(np.array(b), np.array(c))
            slow, fast, again = slow + t1 - t0, fast + t2 - t1, again + t3 - t2
    return slow, fast, again


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--folder", default="data/harness")
    ap.add_argument("--n-boot", type=int, default=200, help="draws per task and optimizer")
    args = ap.parse_args()
    import torch

    from empirical_batch.validation.study import run_study

    torch.set_num_threads(1)
    config = _config(args.folder)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "copy"
        shutil.copytree(ROOT / args.folder, out, ignore=shutil.ignore_patterns("cache"))
        walls = []
        for run in range(3):  # cold, cached, cold again (the control)
            if run == 2:
                shutil.rmtree(out / "cache")
            t0 = time.perf_counter()
            run_study(config, out, stage="report", device="cpu", threads=1, progress=False,
                      command="bench_report")
            walls.append(time.perf_counter() - t0)
        slow, fast, again = _bootstrap_both_ways(config, out, args.n_boot)
    print(f"{args.folder}, config {config.name} ({', '.join(config.tasks)}), torch "
          f"{torch.__version__}, 1 thread")
    print(f"{'report stage, empty cache':<44}{walls[0]:9.2f} s")
    print(f"{'report stage again, fits cached':<44}{walls[1]:9.2f} s")
    print(f"{'control: empty cache again':<44}{walls[2]:9.2f} s")
    print(f"{'growth bootstrap, load_sweep per draw':<44}{slow:9.2f} s")
    print(f"{'growth bootstrap, SeedPool (same refits)':<44}{fast:9.2f} s")
    print(f"{'control: SeedPool again':<44}{again:9.2f} s")


if __name__ == "__main__":
    main()
