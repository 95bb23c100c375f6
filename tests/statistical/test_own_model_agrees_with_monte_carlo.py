"""The one-call API on a user's model agrees with Monte Carlo where Monte Carlo is cheap.

A small MLP (not the demo's CNN) on 3 x 4 x 4 inputs, Gaussian noise sigma = 0.2: Monte Carlo with
4e6 samples gives the truth (about 500 failures), and 20 seeded Subset Simulation runs through
``scarce.vision.failure_probability`` must agree with it: their mean within 3 standard errors
(the runs' own spread combined with the truth's), and their 95% intervals covering the truth in
at least 17 of 20 runs (for a 95% interval, 16 or fewer happens with probability 1.6%). The same
truth checks a label-only target whose levels follow a surrogate of the user's own.
"""

from __future__ import annotations

import math
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import scarce
import scarce.vision as sv

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from user_models import X_MLP, mlp, mlp_surrogate  # noqa: E402

SCALE = 0.2


@pytest.fixture(scope="module")
def truth():
    result = sv.failure_probability(mlp(), X_MLP, scale=SCALE, device="cpu", batch_size=8192, seed=10_000,
                                    estimator=scarce.MonteCarlo(n_samples=4_000_000, batch_size=50_000))
    assert result.n_failed >= 300
    return result


def assert_agree(runs, truth, min_covered: int) -> None:
    """Every run reached the failure, their mean lies within 3 standard errors of the truth (the
    runs' spread combined with the truth's), and at least ``min_covered`` 95% intervals cover it."""
    assert all(r.reached_failure for r in runs)
    estimates = np.array([r.probability for r in runs])
    se = math.hypot(estimates.std(ddof=1) / math.sqrt(len(runs)), truth.cov * truth.probability)
    assert abs(estimates.mean() - truth.probability) <= 3 * se, (estimates.mean(), truth.probability, se)
    covered = sum(lo <= truth.probability <= hi for lo, hi in (r.ci(0.95) for r in runs))
    assert covered >= min_covered, covered


def test_twenty_runs_agree_with_a_monte_carlo_truth(truth):
    model = mlp()
    runs = [sv.failure_probability(model, X_MLP, scale=SCALE, n_samples=1000, device="cpu", seed=s) for s in range(20)]
    assert_agree(runs, truth, min_covered=17)


def test_label_only_runs_estimate_the_targets_probability_not_the_surrogates(truth):
    """The target answers with labels only; the levels follow a surrogate whose own failure
    probability is about four times the target's. 40 runs (seeds 0-39): the mean within 3
    standard errors of the target's truth, and at least 35 of 40 intervals covering it (34 or fewer
    happens with probability 1.4% for 95% intervals; a flagged run's interval counts as it is)."""
    model, surrogate = mlp(), mlp_surrogate()
    own = sv.failure_probability(surrogate, X_MLP, scale=SCALE, device="cpu", batch_size=8192, seed=10_001,
                                 estimator=scarce.MonteCarlo(n_samples=500_000, batch_size=50_000))
    assert own.probability > 2.5 * truth.probability  # the surrogate's own event is another one
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", scarce.errors.ScarceWarning)
        runs = [sv.failure_probability(surrogate, X_MLP, scale=SCALE, n_samples=1000, device="cpu", seed=s,
                                       target=lambda x: model(x).argmax(1), score="surrogate_margin")
                for s in range(40)]
    assert_agree(runs, truth, min_covered=35)
