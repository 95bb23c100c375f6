"""``scarce estimate``: a benchmark problem with a known answer, by Subset Simulation or Monte Carlo."""

from __future__ import annotations

import math
from enum import Enum
from typing import Optional

import typer

from scarce.cli.common import (ALLOW_LARGE, CONFIDENCE, DELTA, JSON_OUTPUT, LEVEL_PROBABILITY_HELP, check_report_options,
                               cli_message, fail, level_probability_option, show_estimate)


class Method(str, Enum):
    ss = "ss"
    mc = "mc"


#: Defaults of the options only Subset Simulation reads: given another value with ``--method mc``, they are refused.
_SUBSET_DEFAULTS = {"--level-probability": "auto", "--kernel": "acs", "--max-queries": None, "--stop-factor": 0.5,
                    "--count-seeds": "independent", "--max-levels": 50}


#: The library's parameter behind each option, for errors that name the parameter (``cli_message``).
_OPTIONS = {"n_samples": "--n-samples", "level_probability": "--level-probability", "stop_factor": "--stop-factor",
            "max_queries": "--max-queries", "max_levels": "--max-levels", "count_seeds": "--count-seeds",
            "probability": "--pf", "dim": "--dim", "k": "--k", "seed": "--seed"}


def estimate(
    problem: str = typer.Option("linear", help="Benchmark problem: linear, four_branch, chi_square, two_regions."),
    dim: Optional[int] = typer.Option(None, help="Latent dimension (linear: 100, chi_square: 50, two_regions: 10)."),
    pf: Optional[float] = typer.Option(None, help="Exact failure probability of the problem (linear, chi_square, two_regions)."),
    k: Optional[float] = typer.Option(None, help="four_branch: branch offset k [default: 7.0]."),
    method: Method = typer.Option(Method.ss, help="ss: Subset Simulation; mc: crude Monte Carlo."),
    n_samples: int = typer.Option(2000, help="Samples per level (Monte Carlo: total samples)."),
    level_probability: str = typer.Option(_SUBSET_DEFAULTS["--level-probability"], help=LEVEL_PROBABILITY_HELP),
    kernel: str = typer.Option(_SUBSET_DEFAULTS["--kernel"], help="MCMC kernel: acs (adaptive conditional sampling), mma (modified Metropolis) "
                                        "or surface (response-surface sampling, for scores close to a linear function plus one isotropic curvature)."),
    max_queries: Optional[int] = typer.Option(None, help="Query budget; a partial, flagged result when exhausted."),
    max_levels: int = typer.Option(_SUBSET_DEFAULTS["--max-levels"],
                                   help="Most levels a run takes; a partial, flagged result when reached."),
    stop_factor: float = typer.Option(
        _SUBSET_DEFAULTS["--stop-factor"], help="Stop at the first level where stop_factor * p0 * N samples failed, in (0, 1]; 1 is the classic rule."
    ),
    count_seeds: str = typer.Option(
        _SUBSET_DEFAULTS["--count-seeds"], help="Whether seeds count among a level's samples: independent (only draws of level 0), always, never."
    ),
    seed: int = typer.Option(0, help="Random seed."),
    confidence: float = CONFIDENCE,
    delta: float = DELTA,
    json_output: bool = JSON_OUTPUT,
    allow_large: bool = ALLOW_LARGE,
) -> None:
    """Estimate the failure probability of a benchmark problem with a known answer."""
    import warnings

    from scarce.errors import ScarceError, ScarceWarning

    try:
        check_report_options(confidence, delta)
        _check_applicable(problem, {"--dim": dim, "--pf": pf, "--k": k}, method,
                          {"--level-probability": level_probability, "--kernel": kernel, "--max-queries": max_queries,
                           "--stop-factor": stop_factor, "--count-seeds": count_seeds, "--max-levels": max_levels})
        rare = _problem(problem, dim, pf, k)
        estimator = _estimator(method, n_samples, level_probability_option(level_probability), kernel, max_queries, stop_factor, count_seeds,
                               allow_large, max_levels)
        _check_reachable(estimator, rare.exact_probability,
                         "--pf" if pf is not None else f"--problem {problem}'s probability")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ScarceWarning)
            result = estimator.estimate(rare, seed=seed) if json_output else _with_progress(estimator, rare, seed)
    except (ScarceError, TypeError) as exc:
        fail(cli_message(exc, _OPTIONS), exc)
    show_estimate(result, caught, json_output=json_output, confidence=confidence, delta=delta,
                  exact=rare.exact_probability)


def _check_applicable(problem: str, problem_options: dict[str, object], method: Method,
                      subset_options: dict[str, object]) -> None:
    """Refuse options the run would ignore: ``--k`` off four_branch, ``--dim``/``--pf`` on it, and
    Subset Simulation's options (given a value other than their default) with ``--method mc``."""
    from scarce.errors import ScarceError, unknown_name_error
    from scarce.problems import PROBLEMS

    if problem not in PROBLEMS:
        raise unknown_name_error("problem", problem, PROBLEMS)
    takes = ("--k",) if problem == "four_branch" else ("--dim", "--pf")
    ignored = [name for name, value in problem_options.items() if value is not None and name not in takes]
    if ignored:
        raise ScarceError(f"{'/'.join(ignored)} {'does' if len(ignored) == 1 else 'do'} not apply to --problem "
                          f"{problem}, which takes {' and '.join(takes)}")
    if method is Method.mc:
        ignored = [name for name, value in subset_options.items() if value != _SUBSET_DEFAULTS[name]]
        if ignored:
            raise ScarceError(f"{'/'.join(ignored)} {'applies' if len(ignored) == 1 else 'apply'} to --method ss "
                              f"only; crude Monte Carlo (--method mc) takes --n-samples, the total samples")


def _problem(name: str, dim: int | None, pf: float | None, k: float | None):  # type: ignore[no-untyped-def]
    """The benchmark problem the options name (four_branch takes k; the others dim and pf)."""
    from scarce.problems import make_problem

    given = (("k", k),) if name == "four_branch" else (("dim", dim), ("probability", pf))
    return make_problem(name, **{key: value for key, value in given if value is not None})  # absent: its default


def _estimator(method: Method, n_samples: int, level_probability: float | str, kernel: str,  # type: ignore[no-untyped-def]
               max_queries: int | None, stop_factor: float, count_seeds: str, allow_large: bool = False,
               max_levels: int = 50):
    from scarce.estimators import MonteCarlo, SubsetSimulation
    from scarce.kernels import make_kernel

    if method is Method.mc:
        return MonteCarlo(n_samples=n_samples, allow_large=allow_large)
    return SubsetSimulation(n_samples=n_samples, level_probability=level_probability, kernel=make_kernel(kernel),
                            max_queries=max_queries, stop_factor=stop_factor, count_seeds=count_seeds,
                            allow_large=allow_large, max_levels=max_levels)


def _check_reachable(estimator, exact: float | None, label: str) -> None:  # type: ignore[no-untyped-def]
    """Refuse a problem whose exact probability lies clearly beyond the levels ``--max-levels`` allows.

    With ``M`` levels a run reaches about ``stop_factor p0^M`` (``M - 1`` intermediate levels, then
    a last one where ``stop_factor p0`` of the samples fail); a failure a decade rarer than that
    could only end flagged ``max_levels`` with an estimate of 0, and is said before the run, with
    the levels it needs. Nearer the bound the run is left to try: its levels are random.
    """
    from scarce.errors import ScarceError
    from scarce.levels import resolve_level_probability

    p0 = resolve_level_probability(estimator.n_samples, getattr(estimator, "level_probability", None))
    levels, factor = getattr(estimator, "max_levels", None), getattr(estimator, "stop_factor", None)
    if not (isinstance(exact, float) and 0.0 < exact < 1.0 and isinstance(p0, float) and 0.0 < p0 < 1.0
            and isinstance(levels, int) and levels > 0 and isinstance(factor, float) and 0.0 < factor <= 1.0):
        return  # Monte Carlo, or a setting the estimator reports on itself
    reach = math.log(factor) + levels * math.log(p0)  # log of the rarest probability M levels reach
    if math.log(exact) < reach - math.log(10.0):
        needed = math.ceil((math.log(exact) - math.log(factor)) / math.log(p0) - 1e-9) + 1
        raise ScarceError(f"{label} {exact:g} needs about {needed} levels at level probability {p0:g}, more than "
                          f"--max-levels {levels}; raise --max-levels to at least {needed}")


def _with_progress(estimator, problem, seed):  # type: ignore[no-untyped-def]
    from scarce.cli.common import level_progress
    from scarce.levels import auto_level_probability

    expected = None
    exact, p0 = problem.exact_probability, getattr(estimator, "level_probability", None)
    if p0 == "auto" and isinstance(estimator.n_samples, int) and estimator.n_samples > 0:
        p0 = auto_level_probability(estimator.n_samples)
    # only a guess for the bar's length: bad values are the estimator's to report, not a crash here
    if isinstance(exact, float) and isinstance(p0, (int, float)) and 0 < exact < 1 and 0 < p0 < 1:
        expected = max(1, math.ceil(math.log(exact) / math.log(p0)))
    with level_progress(problem.name, expected) as on_level:
        return estimator.estimate(problem, seed=seed, callback=on_level)
