"""Your own model through ``scarce.vision.failure_probability``: what the one call costs, and whether it is right.

Two tables, measured in one run on two small classifiers a user might bring (the MLP on
3 x 4 x 4 inputs and the CNN on 3 x 16 x 16 inputs of ``tests/user_models.py``, not the demo's CNN):

1. **Overhead.** The same Subset Simulation run built by hand (a ``transform`` and an
   ``evaluate`` that calls the model and computes the margin, the ten lines a user would write)
   and through the one call, with the batch size set so both send the model the same batches:
   the results must be identical, and the table prints the median wall time of each over
   ``--reps`` alternating pairs and their ratio (the call's overhead), and the ratio with the
   call's default CPU batch size (256).
2. **Agreement.** ``--runs`` seeded runs of the one call against a Monte Carlo truth of
   ``--mc-samples`` samples: mean over truth, its distance in standard errors, the 95% interval
   coverage and the reported over the observed CoV.

    python benchmarks/own_model.py --reps 15 --runs 200
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

import scarce
import scarce.vision as sv
from scarce import RareEventProblem, SubsetSimulation

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from user_models import X_CNN, X_MLP, cnn, mlp  # noqa: E402

MODELS = {"mlp": (mlp, X_MLP, 0.2), "cnn": (cnn, X_CNN, 0.15)}


def by_hand(model: torch.nn.Module, x0: np.ndarray, scale: float, n_samples: int, seed: int) -> scarce.EstimateResult:
    """The run a user builds without the one call: noise, model call, margin and failure flag."""
    flat = x0.reshape(-1)
    with torch.inference_mode():
        label = int(model(torch.from_numpy(x0[None]).float()).argmax())

    def transform(u: np.ndarray) -> np.ndarray:
        return np.clip(flat + scale * u, 0.0, 1.0)

    def evaluate(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        with torch.inference_mode():
            logits = model(torch.from_numpy(x.reshape(-1, *x0.shape)).float()).double().numpy()
        margin = np.delete(logits, label, axis=1).max(axis=1) - logits[:, label]
        return margin, logits.argmax(axis=1) != label

    problem = RareEventProblem(flat.size, evaluate, transform)
    return SubsetSimulation(n_samples=n_samples).estimate(problem, seed=seed)


def _timed(fn) -> tuple[float, scarce.EstimateResult]:  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def overhead(name: str, reps: int, n_samples: int) -> None:
    build, x0, scale = MODELS[name]
    model = build()
    hand, call, default = [], [], []
    for rep in range(reps):  # alternate, so drifts of the machine fall on both sides
        t_hand, r_hand = _timed(lambda: by_hand(model, x0, scale, n_samples, rep))
        t_call, r_call = _timed(lambda: sv.failure_probability(model, x0, scale=scale, n_samples=n_samples, seed=rep,
                                                                device="cpu", batch_size=n_samples))
        t_default, _ = _timed(lambda: sv.failure_probability(model, x0, scale=scale, n_samples=n_samples, seed=rep,
                                                              device="cpu"))
        if (r_hand.probability, r_hand.n_queries) != (r_call.probability, r_call.n_queries):
            raise SystemExit(f"{name} seed {rep}: the one call and the hand-built run differ: "
                             f"{r_call.probability} vs {r_hand.probability}")
        hand.append(t_hand), call.append(t_call), default.append(t_default)
    ratios = [c / h for c, h in zip(call, hand)]
    print(f"| {name} | {n_samples} | {reps} | {statistics.median(hand) * 1e3:.1f} | {statistics.median(call) * 1e3:.1f} "
          f"| {statistics.median(ratios):.3f} | {statistics.median(d / h for d, h in zip(default, hand)):.3f} |")


def agreement(name: str, runs: int, n_samples: int, mc_samples: int) -> None:
    build, x0, scale = MODELS[name]
    model = build()
    truth = sv.failure_probability(model, x0, scale=scale, device="cpu", batch_size=8192, seed=10_000,
                                   estimator=scarce.MonteCarlo(n_samples=mc_samples, batch_size=50_000))
    results = [sv.failure_probability(model, x0, scale=scale, n_samples=n_samples, seed=s, device="cpu")
               for s in range(runs)]
    est = np.array([r.probability for r in results])
    se = math.hypot(est.std(ddof=1) / math.sqrt(runs), truth.cov * truth.probability)
    covered = np.mean([lo <= truth.probability <= hi for lo, hi in (r.ci(0.95) for r in results)])
    reported = float(np.sqrt(np.mean([r.cov**2 for r in results])))
    observed = est.std(ddof=1) / est.mean()
    print(f"| {name} | {truth.probability:.3e} ({truth.n_failed}) | {runs} x {n_samples} | "
          f"{est.mean() / truth.probability:.3f} | {(est.mean() - truth.probability) / se:+.2f} | {covered:.3f} | "
          f"{reported / observed:.2f} | {np.mean([r.n_queries for r in results]):,.0f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=15, help="timed pairs per model")
    parser.add_argument("--runs", type=int, default=200, help="seeded runs per model for the agreement table")
    parser.add_argument("--n-samples", type=int, default=1000)
    parser.add_argument("--mc-samples", type=int, default=10_000_000)
    parser.add_argument("--models", default="mlp,cnn")
    args = parser.parse_args()
    torch.set_num_threads(1)
    names = args.models.split(",")
    print(f"torch threads 1; N = {args.n_samples}\n")
    print("| model | N | pairs | by hand (ms) | one call (ms) | call / hand | default batch / hand |")
    print("|---|---|---|---|---|---|---|")
    for name in names:
        overhead(name, args.reps, args.n_samples)
    print("\n| model | truth (MC failures) | runs x N | mean / truth | (mean - truth) / SE | 95% coverage | "
          "CoV reported / observed | mean queries |")
    print("|---|---|---|---|---|---|---|---|")
    for name in names:
        agreement(name, args.runs, args.n_samples, args.mc_samples)


if __name__ == "__main__":
    main()
