"""The engine's normal draws: float64 is numpy's own stream; float32 is a vectorised Box-Muller.

Seeded statistical checks (Kolmogorov-Smirnov on the coordinates, the squared radius and the
angle of each pair) and exact unit checks of the word-to-pair mapping, tails included.
"""

import math

import numpy as np
import pytest
from scipy import stats

from scarce.errors import ScarceError
from scarce.normals import _box_muller32, check_dtype, standard_normal


def test_float64_is_numpys_own_stream_draw_for_draw():
    ours = standard_normal(np.random.default_rng(3), (7, 5), "float64")
    assert np.array_equal(ours, np.random.default_rng(3).standard_normal((7, 5)))


def test_float32_draws_are_standard_normal_and_pairs_independent():
    z = standard_normal(np.random.default_rng(0), (400, 500), np.float32)
    assert z.dtype == np.float32 and z.shape == (400, 500)
    flat = z.ravel().astype(np.float64)
    assert stats.kstest(flat, stats.norm.cdf).pvalue > 1e-3
    # each word gives (r cos t, r sin t): the first half of the buffer holds the cosines
    half = flat.size // 2
    c, s = flat[:half], flat[half:]
    assert stats.kstest(c * c + s * s, stats.chi2(2).cdf).pvalue > 1e-3
    assert stats.kstest(np.arctan2(s, c), stats.uniform(-np.pi, 2 * np.pi).cdf).pvalue > 1e-3
    assert abs(np.corrcoef(c, s)[0, 1]) < 4 / math.sqrt(half)


class _Words:
    """A stand-in generator whose bit generator returns chosen 64-bit words."""

    def __init__(self, words):
        self.bit_generator = self
        self._words = np.asarray(words, dtype=np.uint64)

    def random_raw(self, n):
        return self._words[:n].copy()


def test_word_mapping_reaches_the_40_bit_tail_and_the_angles():
    top = np.uint64(1) << np.uint64(24)  # u1 = 2 / 2**40, u2 = 0
    quarter = np.uint64(1 << 22)  # angle bits for 2 pi / 4, u1 = 1 / 2**40
    z = _box_muller32(_Words([0, top, quarter]), (6,))
    r_max = math.sqrt(-2 * math.log(2.0**-40))
    assert r_max > 7.4
    np.testing.assert_allclose(z[:3], [r_max, math.sqrt(-2 * math.log(2.0**-39)), 0.0], atol=1e-5)
    np.testing.assert_allclose(z[3:], [0.0, 0.0, r_max], atol=1e-5)
    # the largest word gives u1 = 1: radius 0
    assert np.all(_box_muller32(_Words([np.iinfo(np.uint64).max]), (2,)) == 0.0)


@pytest.mark.parametrize("shape", [(1,), (3,), (5, 7), (2, 3, 4)])
def test_float32_shapes_and_reproducibility(shape):
    a = standard_normal(np.random.default_rng(1), shape, np.float32)
    b = standard_normal(np.random.default_rng(1), shape, np.float32)
    assert a.shape == shape and a.dtype == np.float32 and np.array_equal(a, b)
    assert np.all(np.isfinite(a))


@pytest.mark.parametrize("bad", ["float16", "int64", "double precision", None, 3])
def test_unknown_dtype_names_what_is_allowed(bad):
    with pytest.raises(ScarceError, match=r"dtype must be one of \('float64', 'float32'\)"):
        check_dtype(bad)
