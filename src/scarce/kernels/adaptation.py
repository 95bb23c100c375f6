r"""Scale adaptation, a pure function wrapped around any kernel.

Robbins-Monro on the log scale (Papaioannou et al. 2015, Algorithm 5):

.. math:: \log \lambda_{i+1} = \log \lambda_i + \frac{\hat a_i - a^*}{\sqrt{i}},

where ``a_i`` is the acceptance rate over all chains at MCMC step ``i`` of the
level and ``a*`` the target.  The scale reached at the end of a level starts
the next one.  Each chain's own influence on ``a_i`` is ``1 / n_chains``; the
kernel used at any one step, given its scale, is exactly invariant.
"""

from __future__ import annotations

import math

#: Scales are kept inside these bounds so a run of zero acceptance cannot underflow.
MIN_SCALE, MAX_SCALE = 1e-4, 1e4


def adapt_scale(scale: float, acceptance: float, target: float, step: int) -> float:
    """Next scale after an MCMC step with the observed ``acceptance`` (step counts from 1).

    >>> adapt_scale(1.0, 0.44, 0.44, 1)
    1.0
    >>> adapt_scale(1.0, 0.0, 0.44, 1) < 1.0
    True
    """
    new = math.exp(math.log(scale) + (acceptance - target) / math.sqrt(step))
    return min(MAX_SCALE, max(MIN_SCALE, new))
