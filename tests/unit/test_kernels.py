"""Kernels: names and parameters.  The kernel contract (N(0, I) restricted to a level stays
invariant; proposals are reversible for N(0, I); kernels are stateless) runs over every kernel in
tests/contract/test_contracts.py through :func:`scarce.testing.check_kernel`.
"""

import pytest

from scarce.kernels import ConditionalSampling, ModifiedMetropolis, make_kernel


def test_make_kernel_did_you_mean():
    with pytest.raises(ValueError, match="Did you mean 'acs'"):
        make_kernel("acss")


@pytest.mark.parametrize(
    "factory, match",
    [
        (lambda: ConditionalSampling(spread="wide"), "spread"),
        (lambda: ConditionalSampling(target_acceptance=1.5), "target_acceptance"),
        (lambda: ModifiedMetropolis(proposal="cauchy"), "proposal"),
        (lambda: ModifiedMetropolis(initial_scale=-1), "initial_scale"),
    ],
)
def test_kernel_parameters_are_validated(factory, match):
    with pytest.raises(ValueError, match=match):
        factory()
