"""Scale-out: a grid of real Subset Simulation tasks on 1 vs 2 local Dask workers (issue 6).

Each task is ``SubsetSimulation(n_samples).estimate(linear(dim, P), seed=SeedSequence([base, i]))``
(about 0.3 s on one core), run through :func:`scarce.experiments.executors.run_grid`, so every
result is also written to a result store as it arrives, as in a real run. The script prints

* wall times: serial in this process, Dask with 1 worker, Dask with 2 workers (cluster start-up
  excluded, reported apart; workers warmed up with one import each);
* the speed-up of 2 workers over 1 (the ratio measured in this run);
* the per-task overhead of going through Dask: ``(wall(1 worker) - wall(serial)) / n_tasks``, and
  a no-op round trip (``n_noop`` empty tasks on 1 worker);
* whether the three runs' estimates are identical (bit for bit).

    python benchmarks/scaleout.py            # 40 tasks
    python benchmarks/scaleout.py --tasks 80 --n-samples 10000
    python benchmarks/scaleout.py --vision runs/vision-quick   # the quick vision grid

With ``--vision RUN_DIR`` the grid is the whole quick vision protocol (Monte Carlo on the candidate
seeds, screening, head-to-head: every task of ``scarce vision --preset quick``), reusing the offline
stage cached in ``RUN_DIR`` (run ``make demo`` first) and writing each executor's results to a
fresh run directory.

The speed-up is bounded by the cores: on a 2-core machine shared with other work it is lower
than on an idle one (the load average is printed with the table).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np


def subset_task(task: tuple[int, int, int, int, float]) -> dict:
    """One grid cell: Subset Simulation on a linear problem, seeded by the cell alone."""
    from scarce.estimators import SubsetSimulation
    from scarce.problems import linear

    base, index, n_samples, dim, probability = task
    start = time.perf_counter()
    result = SubsetSimulation(n_samples=n_samples).estimate(linear(dim=dim, probability=probability),
                                                            seed=np.random.SeedSequence([base, index]))
    record = result.to_dict()
    record.pop("wall_time")
    return {"result": record, "seconds": time.perf_counter() - start}


def noop(task: int) -> dict:
    return {"task": task}


def warm_up(task: int) -> dict:
    import scarce.estimators  # noqa: F401
    import scarce.problems  # noqa: F401

    return {"task": task}


def run(executor, tasks: dict, folder: Path) -> tuple[float, dict]:
    from scarce.experiments.executors import run_grid
    from scarce.experiments.store import ResultStore

    store = ResultStore(folder, {"benchmark": "scaleout", "tasks": sorted(tasks)})
    start = time.perf_counter()
    payloads = run_grid(store, executor, subset_task, tasks)
    return time.perf_counter() - start, payloads


def vision_grid(run_dir: str, preset_name: str) -> None:
    """The quick vision protocol on 1 and 2 local Dask workers: wall times, ratio, identity."""
    import warnings

    import torch

    from scarce.applications.vision.pipeline import build_context
    from scarce.applications.vision.protocol import VisionRun, get_preset
    from scarce.errors import ScarceWarning
    from scarce.experiments.executors import DaskExecutor
    from scarce.applications.vision.analysis import result_rows

    torch.set_num_threads(1)
    warnings.simplefilter("ignore", ScarceWarning)
    preset = get_preset(preset_name)
    context = build_context(preset, run_dir, log=lambda *_: None)
    walls, startup, frames, counts = {}, {}, {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        for n in (1, 2):
            start = time.perf_counter()
            with DaskExecutor(n_workers=n, threads_per_worker=1) as executor:
                executor.map(warm_up, range(4 * n))
                startup[n] = time.perf_counter() - start
                run = VisionRun(preset, Path(tmp) / f"dask-{n}", context, executor=executor)
                start = time.perf_counter()
                run.run()
                walls[n] = time.perf_counter() - start
                frame = result_rows(run.store)
                counts[n] = len(frame)
                cols = [c for c in ("stage", "seed_index", "method", "p_hat", "cov", "n_queries", "n_failed") if c in frame]
                frames[n] = frame[cols].sort_values(["stage", "seed_index", "method"]).to_json(orient="records")
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    print(f"\nScale-out, the {preset_name} vision grid ({counts[1]} tasks); {os.cpu_count()} cores, "
          f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(f"{'executor':<16}{'wall (s)':>10}{'tasks/s':>10}{'start-up (s)':>14}")
    for n in (1, 2):
        print(f"{'Dask, %d worker%s' % (n, 's' if n > 1 else ''):<16}{walls[n]:>10.2f}"
              f"{counts[n] / walls[n]:>10.2f}{startup[n]:>14.2f}")
    print(f"\nspeed-up, 2 workers vs 1:            {walls[1] / walls[2]:.2f}x")
    print(f"results identical 1 / 2 workers:     {frames[1] == frames[2]}")
    if frames[1] != frames[2]:
        raise SystemExit("results differ between 1 and 2 workers")


def main() -> None:
    """Time the grid serially and on 1 and 2 local Dask workers (or the vision grid, with ``--vision``)."""
    from scarce.experiments.executors import DaskExecutor, SerialExecutor

    args = _parse_args()
    if args.vision:
        vision_grid(args.vision, args.preset)
        return

    tasks = {f"task-{i:04d}": (args.seed, i, args.n_samples, args.dim, args.probability) for i in range(args.tasks)}
    walls: dict[str, float] = {}
    results: dict[str, dict] = {}
    startup: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        warm_up(0)
        walls["serial"], results["serial"] = run(SerialExecutor(), tasks, Path(tmp) / "serial")
        for n in (1, 2):
            start = time.perf_counter()
            with DaskExecutor(n_workers=n, threads_per_worker=1) as executor:
                executor.map(warm_up, range(4 * n))
                startup[f"dask-{n}"] = time.perf_counter() - start
                walls[f"dask-{n}"], results[f"dask-{n}"] = run(executor, tasks, Path(tmp) / f"dask-{n}")
                if n == 1:
                    start = time.perf_counter()
                    executor.map(noop, range(args.n_noop))
                    noop_seconds = (time.perf_counter() - start) / args.n_noop
    _report(args, tasks, walls, results, startup, noop_seconds)


def _parse_args() -> argparse.Namespace:
    """The command line: the grid's size and problem, or ``--vision RUN_DIR``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=40)
    parser.add_argument("--n-samples", type=int, default=20_000)
    parser.add_argument("--dim", type=int, default=100)
    parser.add_argument("--probability", type=float, default=1e-6)
    parser.add_argument("--n-noop", type=int, default=200)
    parser.add_argument("--seed", type=int, default=2024)
    parser.add_argument("--vision", metavar="RUN_DIR", default=None,
                        help="time the quick vision grid instead, reusing RUN_DIR's offline stage")
    parser.add_argument("--preset", default="quick", help="vision preset of RUN_DIR (with --vision)")
    return parser.parse_args()


def _report(args: argparse.Namespace, tasks: dict, walls: dict[str, float], results: dict[str, dict],
            startup: dict[str, float], noop_seconds: float) -> None:
    """Print the wall times, speed-up, Dask overhead and identity of the estimates; exit if they differ."""

    def estimates(payloads: dict) -> str:
        return json.dumps({k: v["result"] for k, v in payloads.items()}, sort_keys=True, allow_nan=True)

    identical = estimates(results["serial"]) == estimates(results["dask-1"]) == estimates(results["dask-2"])
    task_seconds = [v["seconds"] for v in results["serial"].values()]
    speedup = walls["dask-1"] / walls["dask-2"]
    overhead = (walls["dask-1"] - walls["serial"]) / len(tasks)
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3

    print(f"\nScale-out: {len(tasks)} tasks of SubsetSimulation(n_samples={args.n_samples}) on "
          f"linear(dim={args.dim}, P={args.probability:g}); {os.cpu_count()} cores, load average "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(f"task compute (serial): mean {np.mean(task_seconds):.3f} s, min {min(task_seconds):.3f} s, "
          f"max {max(task_seconds):.3f} s\n")
    print(f"{'executor':<16}{'wall (s)':>10}{'tasks/s':>10}{'start-up (s)':>14}")
    for name in ("serial", "dask-1", "dask-2"):
        label = {"serial": "serial (here)", "dask-1": "Dask, 1 worker", "dask-2": "Dask, 2 workers"}[name]
        print(f"{label:<16}{walls[name]:>10.2f}{len(tasks) / walls[name]:>10.2f}"
              f"{startup.get(name, 0.0):>14.2f}")
    print(f"\nspeed-up, 2 workers vs 1:            {speedup:.2f}x")
    print(f"per-task overhead of Dask vs serial:  {1000 * overhead:+.1f} ms "
          f"({100 * overhead / np.mean(task_seconds):+.1f}% of a task)")
    print(f"no-op task round trip (1 worker):     {1000 * noop_seconds:.1f} ms")
    print(f"estimates identical serial / 1 / 2:   {identical}")
    if not identical:
        raise SystemExit("results differ between executors")


if __name__ == "__main__":
    main()
