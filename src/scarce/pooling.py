r"""Pooling independent runs: the mean of their estimates, their standard errors added in quadrature.

``R`` runs of one estimator on one problem, each with its own seed, are ``R`` independent
unbiased estimates ``P_i`` of the failure probability, each with the CoV it measured. The
pooled estimate and its standard error are

.. math:: \hat P = \frac{1}{R} \sum_i P_i, \qquad
          \mathrm{SE}^2 = \frac{1}{R^2} \sum_i (\mathrm{CoV}_i\, P_i)^2,

with equal weights: weighting by the inverse of each run's variance would favour the runs that
report the least, and where a run's variance follows its estimate (deep runs, below) those are
the runs that came out low, so the weighted mean would be biased low. The interval is the
log-normal one for the mean (:func:`scarce.envelope.lognormal_interval`) with
``CoV = SE / P_hat`` and Student's ``t`` on Satterthwaite's (1946) degrees of freedom of the
sum, ``nu = (sum v_i)^2 / sum (v_i^2 / nu_i)`` with ``v_i = (CoV_i P_i)^2`` and ``nu_i`` each
run's own (:meth:`~scarce.results.EstimateResult.degrees_of_freedom`; a run that takes a normal
quantile counts as infinite). The variances weigh the degrees of freedom as they came out: when
one or two runs report most of the variance (the runs that came out high, on the problems below,
each resting on one or two degrees of freedom), the pooled variance rests on theirs, and the
interval can be far wider than one run's. That width is the evidence: the spread of such runs
is carried by the few that came out high. The standard errors are combined relative to the
largest, so that no square underflows at the smallest probabilities the engine reaches.

Why the runs' own standard errors, and not the spread of their estimates: on problems where a
single run's interval falls short, Subset Simulation runs many levels deep on a model with
several routes to the failure, the estimates' law is skewed, a run that came out low reports
a low variance, and a Student interval from a handful of runs' spread is short for the same
reason (a low mean comes with a low spread). Adding the runs' own variances lends the high runs'
variance to the low ones. The benchmark pages ("Fifteen to eighteen levels on the network"
on the engine page, "Error bars at very rare events" on the own-model page) give what ten and
five runs pooled this way hold, and where it errs wide.
"""

from __future__ import annotations

import json
import math
import numbers
from collections import Counter
from collections.abc import Sequence

from scarce.envelope import satterthwaite_degrees_of_freedom
from scarce.errors import ScarceError, show
from scarce.results import POOLED_PREFIX, EstimateResult

__all__ = ["POOLED_PREFIX", "pool_results"]


def pool_results(results: Sequence[EstimateResult]) -> EstimateResult:
    """One result from ``results``, independent runs of one estimator on one problem (module notes).

    Parameters
    ----------
    results : sequence of EstimateResult
        At least two runs, each with its own seed, that reached the failure event and measured
        their error. They must be runs of one problem: only the results' ``method`` and
        ``problem`` names are compared, and a name need not tell two problems apart (the vision
        problems' names give the noise, the label and the score, not the input or the model).
        Refused: a run that did not reach the failure event (a bound, not an estimate); a
        thin-evidence run (its CoV is not its error: its interval falls back on its first
        level); a Monte Carlo count (pooled exactly by adding the counts, as one run of all the
        samples).

    Returns
    -------
    EstimateResult
        ``method`` ``"pooled <method>"``; the mean estimate and the CoV of the pooled standard
        error; the runs' queries, samples, failures and wall time added up; no levels;
        ``info["pooled_runs"]``, ``info["pooled_probabilities"]``, ``info["pooled_covs"]``,
        ``info["pooled_flags"]`` (each run's flags with how many runs carry them, shown among the
        pooled result's :attr:`~scarce.results.EstimateResult.flags`) and, where some run's
        interval takes Student's ``t``, ``info["cov_degrees_of_freedom"]``
        (Satterthwaite's). Its :meth:`~scarce.results.EstimateResult.ci` is the log-normal
        interval for the mean on those degrees of freedom.
    """
    runs = _checked(results)
    count = len(runs)
    estimates = [float(run.probability) for run in runs]
    mean = math.fsum(estimates) / count
    # standard errors relative to the largest, so that no square underflows at tiny probabilities
    log_errors = [math.log(run.cov) + math.log(p) for run, p in zip(runs, estimates)]
    top = max(range(count), key=log_errors.__getitem__)
    shares = [math.exp(x - log_errors[top]) for x in log_errors]
    squares = [w * w for w in shares]
    info: dict = {"pooled_runs": count, "pooled_probabilities": estimates,
                  "pooled_covs": [float(run.cov) for run in runs], "pooled_flags": _flag_counts(runs)}
    dof = satterthwaite_degrees_of_freedom(math.fsum(squares), zip(squares, [run.degrees_of_freedom() for run in runs]))
    if dof is not None:
        info["cov_degrees_of_freedom"] = dof
    probabilities = {run.level_probability for run in runs}
    return EstimateResult(
        method=POOLED_PREFIX + runs[0].method,
        probability=mean,
        # the bracket is bounded (by R), so only the one product with the largest CoV can be large
        cov=float(runs[top].cov) * ((estimates[top] / mean) * (math.sqrt(math.fsum(squares)) / count)),
        n_queries=sum(int(run.n_queries) for run in runs),
        n_samples=sum(int(run.n_samples) for run in runs),
        n_failed=sum(int(run.n_failed) for run in runs),
        reached_failure=True,
        status="converged",
        wall_time=math.fsum(float(run.wall_time) for run in runs),
        level_probability=probabilities.pop() if len(probabilities) == 1 else None,
        interval="lognormal",
        problem=runs[0].problem,
        info=info,
    )


def _flag_counts(runs: list[EstimateResult]) -> list[str]:
    """Each flag some run carries, with how many of the runs carry it (``"3 of 10 runs: few chains: ..."``)."""
    counts = Counter(flag for run in runs for flag in run.flags)  # in the order first seen
    return [f"{n} of {len(runs)} runs: {flag}" for flag, n in counts.items()]


def _checked(results: object) -> list[EstimateResult]:
    """``results`` as a list of runs that can be pooled, or a ScarceError naming the one that cannot and why."""
    if isinstance(results, (str, bytes)) or not isinstance(results, Sequence):
        raise ScarceError(f"results must be a sequence (a list or tuple) of EstimateResult, got {show(results)}")
    runs = list(results)
    if len(runs) < 2:
        raise ScarceError(f"results must hold at least 2 independent runs to pool, got {len(runs)}")
    for i, run in enumerate(runs):
        _check_run(i, run)
    for name in ("method", "problem"):
        values = sorted({getattr(run, name) for run in runs})
        if len(values) > 1:
            raise ScarceError(f"results must be runs of one estimator on one problem: their {name}s are {values}")
    _check_distinct(runs)
    return runs


def _check_distinct(runs: list[EstimateResult]) -> None:
    """A ScarceError when two runs are not independent: a shared recorded seed (whatever their
    settings, they draw the same random numbers), or the same estimate, queries and levels.

    The CoV is left out of the comparison: one run's CoV computed two ways (``cov_depth``) is
    still one run.
    """
    seen: dict[object, int] = {}
    for i, run in enumerate(runs):
        seed = run.info.get("seed")
        keys = [("levels", run.probability, run.n_queries, tuple(level.threshold for level in run.levels))]
        if isinstance(seed, numbers.Integral) and not isinstance(seed, bool):
            keys.insert(0, ("seed", json.dumps(int(seed))))
        elif isinstance(seed, dict):
            keys.insert(0, ("seed", json.dumps(seed, sort_keys=True, default=str)))
        for key in keys:
            if key in seen:
                raise ScarceError(
                    f"results[{seen[key]}] and results[{i}] " + (
                        f"share the seed {seed!r}: their random numbers are the same, so they are not independent"
                        if key[0] == "seed" else "are one run (the same estimate, queries and levels)")
                    + "; pool independent runs, each with its own seed")
            seen[key] = i


def _check_run(i: int, run: object) -> None:
    """A ScarceError when run ``i`` is no valid result or has no measured error to pool."""
    if not isinstance(run, EstimateResult):
        raise ScarceError(f"results[{i}] must be an EstimateResult, got {show(run)}")
    try:
        EstimateResult.from_dict(run.to_dict())  # every field what an estimator writes
    except ScarceError as error:
        raise ScarceError(f"results[{i}] is not a valid result: {error}") from None
    except (TypeError, ValueError, RecursionError) as error:  # levels that are no level records, info that cannot be copied
        raise ScarceError(f"results[{i}] is not a valid result: its fields cannot be read as a result's "
                          f"({type(error).__name__}: {error})") from None
    if run.method.startswith(POOLED_PREFIX):
        raise ScarceError(f"results[{i}] is already a pooled result: pool the runs themselves, each counted once")
    if run.interval != "lognormal":
        raise ScarceError(f"results[{i}] is a {run.interval} count ({run.method}): pool counts exactly by adding "
                          "their failures and samples, as one run of all the samples")
    left_out = ("; leaving it out of the pool would bias it (such runs' estimates differ from the others'): report "
                "it apart, or run every seed with more samples")
    if not run.reached_failure:
        raise ScarceError(f"results[{i}] did not reach the failure event ({run.status}): it is a bound, not an "
                          "estimate, and cannot be pooled" + left_out)
    if run.thin_evidence:
        raise ScarceError(f"results[{i}] carries thin evidence ({run.thin_evidence_reason}): its CoV is not its "
                          "error (its interval falls back on its first level), so it cannot be pooled by it" + left_out)
    if not (run.probability > 0.0 and math.isfinite(run.cov) and run.cov > 0.0):
        raise ScarceError(f"results[{i}] has no measured error to pool: probability {run.probability!r}, "
                          f"CoV {run.cov!r}; pooling needs an estimate above 0 with a finite CoV above 0")
