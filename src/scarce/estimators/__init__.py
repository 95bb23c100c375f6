"""Estimators of a failure probability; all return :class:`scarce.results.EstimateResult`."""

from scarce.estimators.amls import AMLS
from scarce.estimators.montecarlo import MonteCarlo
from scarce.estimators.registry import available_estimators, make_estimator, register_estimator
from scarce.estimators.splitting import AdaptiveMultilevelSplitting
from scarce.estimators.subset import SubsetSimulation

__all__ = ["AMLS", "AdaptiveMultilevelSplitting", "MonteCarlo", "SubsetSimulation", "available_estimators",
           "make_estimator", "register_estimator"]
