"""The public check suites (:mod:`scarce.testing`) over every registered ruler and kernel, and
proof that each suite catches a component that breaks its contract, naming the rule."""

from __future__ import annotations

import numpy as np
import pytest

from scarce.kernels import KERNELS, ConditionalSampling, Kernel, ModifiedMetropolis, ResponseSurfaceSampling
from scarce.rulers import available_rulers, make_ruler
from scarce.rulers.linear import CentroidRuler
from scarce.testing import ContractViolation, check_kernel, check_ruler, kernel_checks, ruler_checks
from scarce.testing.kernels import DIRECTION

KERNEL_VARIANTS = {
    **{name: cls() for name, cls in KERNELS.items()},
    "acs_seed_spread": ConditionalSampling(spread="seeds"),
    "acs_fixed": ConditionalSampling(adapt=False),
    "mma_normal": ModifiedMetropolis(proposal="normal"),
    "mma_adaptive": ModifiedMetropolis(adapt=True),
    "surface_mma": ResponseSurfaceSampling(local=ModifiedMetropolis()),
}


@pytest.mark.parametrize("check", ruler_checks(None), ids=lambda c: c.rule)
@pytest.mark.parametrize("name", available_rulers())
def test_every_registered_ruler_keeps_the_contract(name, check):
    check(make_ruler(name))


@pytest.mark.parametrize("check", kernel_checks(None), ids=lambda c: c.rule)
@pytest.mark.parametrize("name", sorted(KERNEL_VARIANTS))
def test_every_kernel_keeps_the_contract(name, check):
    check(KERNEL_VARIANTS[name])


# -- each suite catches what breaks it ------------------------------------------------------------
class _UpsideDown(CentroidRuler):
    """Scores the wrong way round: larger is closer to the normal embeddings."""

    def score_samples(self, Z):  # type: ignore[no-untyped-def]
        return -super().score_samples(Z)


class _Float32(CentroidRuler):
    def score_samples(self, Z):  # type: ignore[no-untyped-def]
        return super().score_samples(Z).astype(np.float32)


class _Forgetful(CentroidRuler):
    """fit returns a new object instead of self."""

    def fit(self, Z, y):  # type: ignore[no-untyped-def]
        super().fit(Z, y)
        return CentroidRuler().fit(Z, y)


@pytest.mark.parametrize("ruler, rule", [(_UpsideDown(), "orientation"), (_Float32(), "scores_float64_of_shape_n"),
                                         (_Forgetful(), "fit_returns_self")])
def test_the_ruler_suite_names_the_rule_a_ruler_breaks(ruler, rule):
    with pytest.raises(ContractViolation, match=rule) as info:
        check_ruler(ruler)
    assert info.value.rule == rule


class _Drifting(Kernel):
    """Not reversible: drifts every proposal outward."""

    name, initial_scale, adapt = "drift", 0.5, False

    def propose(self, u, params, rng):  # type: ignore[no-untyped-def]
        return u + 0.3 * DIRECTION + 0.3 * rng.standard_normal(u.shape)


class _Stateful(ConditionalSampling):
    """Keeps a counter between calls, so the same generator state gives other proposals."""

    calls = 0

    def propose(self, u, params, rng):  # type: ignore[no-untyped-def]
        type(self).calls += 1
        return super().propose(u, params, rng) * (1.0 + 1e-3 * type(self).calls)


@pytest.mark.parametrize("kernel, rule", [(_Drifting(), "proposal_keeps_standard_normal"),
                                          (_Stateful(), "stateless")])
def test_the_kernel_suite_names_the_rule_a_kernel_breaks(kernel, rule):
    with pytest.raises(ContractViolation, match=rule) as info:
        check_kernel(kernel)
    assert info.value.rule == rule


def test_the_invariance_check_rejects_a_drifting_kernel_even_through_a_level():
    from scarce.testing.kernels import check_restricted_gaussian_invariant

    with pytest.raises(ContractViolation, match="restricted Gaussian|barely move"):
        check_restricted_gaussian_invariant(_Drifting())
