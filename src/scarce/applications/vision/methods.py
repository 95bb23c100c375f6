"""The estimators compared on a perturbed seed image, by key.

========================  ==============================================================
key                       method
========================  ==============================================================
``smc``                   plain Monte Carlo (ground truth), exact binomial interval
``ss_margin``             classic Subset Simulation with the logit-margin performance function
                          on our engine (exact terminal event, tie-aware levels)
``amls``                  AMLS as published by Webb et al. (2019) and reused by SAFARI: the
                          paper's "Traditional SS" column, level jump on stalls included
``scarce:<ruler>``        SCARCE: our engine with ``score = ruler(embedding)``
========================  ==============================================================
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from scarce.applications.vision.problem import VisionModel, perturbation_problem
from scarce.checks import check_in_interval, check_positive_int
from scarce.errors import ScarceError, ScarceWarning, unknown_name_error
from scarce.results import EstimateResult
from scarce.seeding import SeedLike

__all__ = ["MethodSettings", "display_name", "run_method"]

_FIXED = {"smc": "SMC", "ss_margin": "Margin SS", "amls": "AMLS (Webb 2019)", "ss_surrogate": "Surrogate-margin SS"}
#: The score of each fixed method's levels (Monte Carlo reads only the failure flag).
_SCORES = {"smc": "margin", "ss_margin": "margin", "amls": "margin", "ss_surrogate": "surrogate_margin"}


@dataclass(frozen=True)
class MethodSettings:
    """Sizes of each method (the presets fill these in)."""

    smc_samples: int = 100_000
    # Points per Monte Carlo model call: a memory bound. 8192 float32 latents (26 MB) stay below
    # glibc's mmap threshold; 50,000 cost page faults, 69 against 44 us per sample on the quick
    # problem (float64, 2 cores).
    smc_batch: int = 8192
    ss_samples: int = 2000
    level_probability: float = 0.1
    # Levels before a run stops, flagged "max_levels" (p0**max_levels is the smallest
    # probability a run resolves; seeds below it are reported as not reached).
    max_levels: int = 30
    # Level 0 of Subset Simulation: plain Monte Carlo. A Latin hypercube helps scores that are
    # nearly additive in the latent coordinates; through a CNN on 784 pixels its gain is small
    # and generating it costs 44 us per point (784 inverse normal CDFs), more than the quick
    # classifier's forward pass (about 30 us), against 3.3 us for independent float32 draws.
    first_level: str = "mc"
    # Precision of the latent draws of Monte Carlo and Subset Simulation (784 per query). float32
    # draws the normals about 3x faster than numpy's float64 ziggurat (scarce.normals) and halves
    # the chains' memory traffic; those draws are most of the engine's own time on this problem.
    latent_dtype: str = "float32"
    # Subset Simulation ends at the first level where stop_factor * p0 * N samples failed
    # (scarce.estimators.subset; 1 is the classic rule of Au and Beck).
    stop_factor: float = 0.5
    # Seeds count among a level's samples only when they are independent draws (level 1); from
    # deeper levels they are chain states and are only moved from (scarce.estimators.subset).
    count_seeds: str = "independent"
    # Acceptance rate adaptive conditional sampling steers its scale toward in the Subset
    # Simulation of every estimate, margin and rulers (scarce.kernels.ConditionalSampling; 0.35 is
    # the engine's default); the offline harvest keeps the default.
    target_acceptance: float = 0.35
    amls_samples: int = 1000
    amls_steps: int = 250

    def __post_init__(self) -> None:
        from scarce.estimators.subset import _FIRST_LEVELS, check_count_seeds
        from scarce.levels import check_level_sizes
        from scarce.normals import check_dtype

        # checked here so a bad preset fails when it is built, not when its first task runs;
        # numpy scalars become Python numbers (the settings are stored as JSON)
        for name in ("smc_samples", "smc_batch", "max_levels", "amls_steps"):
            object.__setattr__(self, name, check_positive_int(f"methods.{name}", getattr(self, name)))
        p0 = check_in_interval("methods.level_probability", self.level_probability, 0.0, 0.5)
        object.__setattr__(self, "level_probability", p0)
        for name in ("ss_samples", "amls_samples"):
            try:
                n, _ = check_level_sizes(getattr(self, name), p0)
            except ScarceError as error:
                raise ScarceError(f"methods.{name}: {error}") from None
            object.__setattr__(self, name, n)
        object.__setattr__(self, "stop_factor", check_in_interval("stop_factor", self.stop_factor, 0.0, 1.0))
        object.__setattr__(self, "target_acceptance", check_in_interval(
            "methods.target_acceptance", self.target_acceptance, 0.0, 1.0, low_open=True, high_open=True))
        check_count_seeds(self.count_seeds)
        if self.first_level not in _FIRST_LEVELS:
            raise ScarceError(f"methods.first_level must be one of {_FIRST_LEVELS}, got {self.first_level!r}")
        try:
            check_dtype(self.latent_dtype)
        except ScarceError:
            raise ScarceError(f"methods.latent_dtype must be 'float32' or 'float64', got {self.latent_dtype!r}") from None

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def display_name(key: str) -> str:
    """Human name of a method key: ``scarce:mah_bad`` -> ``SCARCE mah_bad``."""
    if key.startswith("scarce:"):
        return f"SCARCE {key.split(':', 1)[1]}"
    return _FIXED.get(key, key)


def _estimator(key: str, settings: MethodSettings) -> Any:
    from scarce.estimators import MonteCarlo, SubsetSimulation
    from scarce.kernels import ConditionalSampling

    if key == "smc":
        return MonteCarlo(n_samples=settings.smc_samples, batch_size=settings.smc_batch, dtype=settings.latent_dtype)
    if key == "amls":
        from scarce.estimators.amls import AMLS

        return AMLS(n_samples=settings.amls_samples, level_probability=settings.level_probability,
                    n_steps=settings.amls_steps, max_levels=settings.max_levels)
    return SubsetSimulation(n_samples=settings.ss_samples, level_probability=settings.level_probability,
                            max_levels=settings.max_levels, first_level=settings.first_level,
                            dtype=settings.latent_dtype, stop_factor=settings.stop_factor,
                            count_seeds=settings.count_seeds,
                            kernel=ConditionalSampling(target_acceptance=settings.target_acceptance))


def run_method(
    key: str,
    model: VisionModel,
    image: np.ndarray,
    label: int,
    noise: Any,
    settings: MethodSettings,
    *,
    rulers: dict[str, Any] | None = None,
    seed: SeedLike = None,
    estimator: Any = None,
) -> tuple[EstimateResult, dict[str, float]]:
    """Run one method on one seed image; returns the result and a timing split.

    ``key`` picks the score (and, unless ``estimator`` is given, the estimator the settings
    describe); ``estimator`` runs another engine on that method's problem, as the vision
    benchmark does to compare adaptive multilevel splitting with Subset Simulation on the margin.

    The timing split has ``wall`` (the whole estimate), ``forward`` (seconds inside the
    classifier's batched forward passes) and ``score`` (the margin or the ruler on the pass's
    outputs), so the engine's own work is ``wall - forward - score``.
    """
    rulers = rulers or {}
    if key.startswith("scarce:"):
        name = key.split(":", 1)[1]
        if name not in rulers:
            raise unknown_name_error("fitted ruler", name, rulers)
        score: Any = rulers[name]
    elif key in _FIXED:
        score = _SCORES[key]
        if key == "smc" and getattr(model, "access", "logits") == "labels":
            score = "none"  # Monte Carlo needs only the target's labels: no surrogate pass
    else:
        raise unknown_name_error("method", key, [*_FIXED, *(f"scarce:{r}" for r in rulers)])
    problem = perturbation_problem(model, image, label, noise, score=score)
    model.timer.reset()
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ScarceWarning)
        engine = _estimator(key, settings) if estimator is None else estimator
        result = engine.estimate(problem, seed=seed)
    wall = time.perf_counter() - start
    if not np.isfinite(result.probability):
        raise ScarceError(f"{display_name(key)} returned a non-finite estimate {result.probability}")
    return result, {"wall": wall, "forward": model.timer.seconds, "score": model.timer.score_seconds}
