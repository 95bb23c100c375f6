"""Unit tests of the CoV formula, intervals and the Ville envelope."""

import math

import numpy as np
import pytest
from scipy.stats import binomtest

from scarce.envelope import (
    Envelope,
    chain_correlation_factor,
    clopper_pearson,
    combine_cov,
    level_cov,
    lognormal_interval,
)


def test_independent_samples_have_zero_correlation_factor():
    ind = np.array([[1], [0], [0], [1]], dtype=bool)
    assert chain_correlation_factor(ind, np.ones_like(ind)) == 0.0


def test_constant_chains_have_maximal_correlation():
    # each chain repeats its seed's indicator: rho(k) = 1 for every lag,
    # gamma = 2 * sum_{k=1}^{Ns-1} (1 - k/Ns) = Ns - 1
    ind = np.repeat(np.array([[1], [0], [0], [0], [1]], dtype=bool), 4, axis=1)
    gamma = chain_correlation_factor(ind, np.ones_like(ind))
    assert gamma == pytest.approx(3.0)


def test_correlation_factor_by_hand():
    ind = np.array([[1, 1, 0], [0, 0, 1]], dtype=float)
    p = 0.5
    r0 = p * (1 - p)
    r1 = (1 * 1 + 1 * 0 + 0 * 0 + 0 * 1) / 4 - p * p
    r2 = (1 * 0 + 0 * 1) / 2 - p * p
    expected = 2 * ((1 - 1 / 3) * r1 / r0 + (1 - 2 / 3) * r2 / r0)
    assert chain_correlation_factor(ind, np.ones((2, 3), bool)) == pytest.approx(max(expected, -1.0))


def test_mask_excludes_missing_states():
    ind = np.array([[1, 1, 1], [0, 0, 0]], dtype=float)
    mask = np.array([[True, True, True], [True, True, False]])
    with_pad = chain_correlation_factor(ind, mask)
    ind2 = ind.copy()
    ind2[1, 2] = 1  # a value in a masked slot must not matter
    assert chain_correlation_factor(ind2, mask) == with_pad


def test_au_beck_level_cov():
    assert level_cov(0.1, 1000) == pytest.approx(math.sqrt(0.9 / 100))
    assert level_cov(0.1, 1000, 2.0) == pytest.approx(math.sqrt(0.9 / 100 * 3))
    assert level_cov(0.0, 1000) == math.inf
    assert combine_cov([0.3, 0.4]) == pytest.approx(0.5)


def test_lognormal_interval_is_centred_on_log_scale():
    lo, hi = lognormal_interval(1e-6, 0.3, 0.95)
    assert lo < 1e-6 < hi
    assert math.log(hi / 1e-6) == pytest.approx(math.log(1e-6 / lo))


@pytest.mark.parametrize("k, n", [(0, 50), (3, 100), (50, 50), (17, 1000)])
def test_clopper_pearson_matches_scipy(k, n):
    ref = binomtest(k, n).proportion_ci(0.95, method="exact")
    assert clopper_pearson(k, n) == pytest.approx((ref.low, ref.high))


def test_envelope_is_delta_times_running_estimate():
    env = Envelope.from_running([0.1, 0.01, 0.001], 0.001, delta=0.05)
    assert env.level_lower == pytest.approx((0.005, 0.0005, 0.00005))
    assert env.lower == pytest.approx(0.00005)
    scaled = env.scaled(2.0)
    assert scaled.lower == pytest.approx(0.0001) and scaled.factor == 2.0


@pytest.mark.parametrize("delta", [0.0, 1.0, -0.1, float("nan")])
def test_envelope_rejects_bad_delta(delta):
    with pytest.raises(ValueError, match="delta"):
        Envelope.from_running([0.1], 0.1, delta=delta)
