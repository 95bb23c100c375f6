"""A reliability engineer's limit state in plain numpy: the probability that a beam's load exceeds its capacity.

Resistance ``R ~ LogNormal(median 6, sigma_log 0.1)`` and load ``S ~ Gumbel(mode 2.5, scale 0.35)``
fail when ``g = R - S <= 0``. Both are written as maps from independent standard normals (the
engine's latent space): ``R = 6 exp(0.1 u1)`` and ``S = 2.5 - 0.35 log(-log Phi(u2))``. Subset
Simulation climbs the score ``-g`` to the failure event; Monte Carlo with the same seed checks it
where it is cheap. Run: ``python examples/reliability_limit_state.py``.
"""

import numpy as np
from scipy.special import log_ndtr

import scarce


def evaluate(u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Score ``-g(u)`` (larger is closer to failure) and the failure flag ``g <= 0``, for a batch."""
    resistance = 6.0 * np.exp(0.1 * u[:, 0])
    load = 2.5 - 0.35 * np.log(-log_ndtr(u[:, 1]))
    g = resistance - load
    return -g, g <= 0.0


def main() -> None:
    problem = scarce.RareEventProblem(dim=2, evaluate=evaluate, name="beam: R - S <= 0")
    result = scarce.SubsetSimulation(n_samples=2000).estimate(problem, seed=0)
    print(result)
    check = scarce.MonteCarlo(n_samples=4_000_000).estimate(problem, seed=1)
    print(check)
    print(f"Subset Simulation used {result.n_queries:,} model calls, Monte Carlo {check.n_queries:,}")


if __name__ == "__main__":
    main()
