"""The one-call API on a user's model agrees with Monte Carlo where Monte Carlo is cheap.

A small MLP (not the demo's CNN) on 3 x 4 x 4 inputs, Gaussian noise sigma = 0.2: Monte Carlo with
4e6 samples gives the truth (about 500 failures), and 20 seeded Subset Simulation runs through
``scarce.vision.failure_probability`` must agree with it: their mean within 3 standard errors
(the runs' own spread combined with the truth's), and their 95% intervals covering the truth in
at least 17 of 20 runs (for a 95% interval, 16 or fewer happens with probability 1.6%).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np

import scarce
import scarce.vision as sv

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from user_models import X_MLP, mlp  # noqa: E402

SCALE = 0.2


def test_twenty_runs_agree_with_a_monte_carlo_truth():
    model = mlp()
    truth = sv.failure_probability(model, X_MLP, scale=SCALE, device="cpu", batch_size=8192, seed=10_000,
                                   estimator=scarce.MonteCarlo(n_samples=4_000_000, batch_size=50_000))
    assert truth.n_failed >= 300
    runs = [sv.failure_probability(model, X_MLP, scale=SCALE, n_samples=1000, device="cpu", seed=s) for s in range(20)]
    assert all(r.reached_failure for r in runs)
    estimates = np.array([r.probability for r in runs])
    se = math.hypot(estimates.std(ddof=1) / math.sqrt(len(runs)), truth.cov * truth.probability)
    assert abs(estimates.mean() - truth.probability) <= 3 * se, (estimates.mean(), truth.probability, se)
    covered = sum(lo <= truth.probability <= hi for lo, hi in (r.ci(0.95) for r in runs))
    assert covered >= 17, covered
