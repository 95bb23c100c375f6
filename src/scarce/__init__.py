"""scarce: rare-failure probabilities of AI systems with Subset Simulation and geometric rulers.

The top level imports only numpy (and scipy lazily); torch, transformers, dask
and matplotlib are imported where they are used.

>>> import scarce
>>> result = scarce.SubsetSimulation(n_samples=500).estimate(scarce.problems.linear(dim=10, probability=1e-3), seed=0)
>>> result.reached_failure
True
"""

from scarce import problems
from scarce.errors import (
    BudgetExhaustedWarning,
    FewChainsWarning,
    FewParticlesWarning,
    EvaluationError,
    LowAcceptanceWarning,
    ScarceError,
    ScarceWarning,
    StalledLevelWarning,
)
from scarce.estimators import AdaptiveMultilevelSplitting, MonteCarlo, SubsetSimulation
from scarce.kernels import ConditionalSampling, ModifiedMetropolis, make_kernel
from scarce.pooling import pool_results
from scarce.problem import RareEventProblem
from scarce.results import EstimateResult, LevelDiagnostics, LevelState

__version__ = "0.1.0"

__all__ = [
    "AdaptiveMultilevelSplitting",
    "BudgetExhaustedWarning",
    "FewChainsWarning",
    "FewParticlesWarning",
    "ConditionalSampling",
    "EstimateResult",
    "EvaluationError",
    "LevelDiagnostics",
    "LevelState",
    "LowAcceptanceWarning",
    "ModifiedMetropolis",
    "MonteCarlo",
    "RareEventProblem",
    "ScarceError",
    "ScarceWarning",
    "StalledLevelWarning",
    "SubsetSimulation",
    "make_kernel",
    "pool_results",
    "problems",
]
