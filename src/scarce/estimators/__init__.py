"""Estimators of a failure probability; all return :class:`scarce.results.EstimateResult`."""

from scarce.estimators.amls import AMLS
from scarce.estimators.montecarlo import MonteCarlo
from scarce.estimators.subset import SubsetSimulation

__all__ = ["AMLS", "MonteCarlo", "SubsetSimulation"]
