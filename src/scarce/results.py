"""One result type shared by every estimator (Subset Simulation, Monte Carlo, baselines)."""

from __future__ import annotations

import copy
import json
import math
import numbers
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import numpy as np

from scarce.envelope import Envelope, clopper_pearson, lognormal_interval
from scarce.errors import show

#: Why a run stopped.
STATUSES = ("converged", "stalled", "max_levels", "budget")
#: The revision of what each estimator returns for a given seed and model (estimate, CoV,
#: interval), by :attr:`EstimateResult.method`. Raised with every change that alters it, so that a
#: run directory never mixes results of two revisions (:class:`scarce.experiments.store.ResultStore`).
#: A method not listed, and every result stored before revisions were recorded, is at revision 1;
#: Subset Simulation's 2 is the whole genealogy's CoV for deep runs (``cov_depth="auto"``).
ESTIMATOR_REVISIONS: dict[str, int] = {"subset_simulation": 2}
#: A pooled result's method (:func:`scarce.pooling.pool_results`) is this followed by its runs' own.
POOLED_PREFIX = "pooled "


def estimator_revision(method: str) -> int:
    """The current revision of ``method``'s results (:data:`ESTIMATOR_REVISIONS`; 1 when unlisted); a pooled
    result's is its runs' method's."""
    return ESTIMATOR_REVISIONS.get(method.removeprefix(POOLED_PREFIX), 1)
#: Chains the first level with a failure must have before a lineage count can flag thin evidence.
THIN_EVIDENCE_MIN_CHAINS = 20
#: Below this many degrees of freedom of its interval's ``t`` quantile, a result's summary names
#: them: its CoV is then a variance measured on a few lineages (:meth:`EstimateResult.degrees_of_freedom`).
FEW_DEGREES_OF_FREEDOM = 5.0
#: When failures first appear in Markov chains rather than among independent draws, the least
#: fraction of that level's chains they must descend from (below it: thin evidence).
THIN_EVIDENCE_CHAIN_FRACTION = 0.05


@dataclass(frozen=True)
class LevelDiagnostics:
    """What happened at one level of a Subset Simulation run.

    Level 0 is the initial Monte Carlo population (``threshold = -inf``,
    ``probability = 1``).  Level ``l >= 1`` has the boundary score ``gamma_l`` chosen
    from the level ``l - 1`` population (the level holds the samples above it, ties at
    ``gamma_l`` split by their tie-breaking keys, :mod:`scarce.levels`), its counted
    conditional probability ``p_l = #(above gamma_l) / N``, and the statistics of the
    MCMC run that populated it.  The last level of a converged run has ``threshold = inf``
    (the failure event) and costs no queries.

    Attributes
    ----------
    level : int
    threshold : float
    probability : float
        Counted conditional probability ``p_l``.
    cumulative_probability : float
        Running estimate ``P_hat_l = p_1 ... p_l``.
    n_seeds : int
        Samples of level ``l - 1`` in level ``l`` (the chain seeds).
    correlation_factor : float
        Au-Beck ``gamma_l`` of the level-``l`` indicator along the chains of level ``l - 1``.
    cov : float
        This level's CoV contribution ``delta_l``.
    n_queries : int
        Model evaluations spent to populate this level.
    n_failed : int
        Failures in this level's population.
    acceptance_rate : float
        MCMC acceptance rate while populating this level (NaN at level 0 and at the failure level).
    kernel_scale : float
        Kernel scale used (aCS ``lambda``, Metropolis spread; NaN where no MCMC ran).
    stalled : bool
        A plateau: every sample of the level below that did not fail shared one score, so the
        threshold could not rise and this level is the failure event, counted from that tie.
    """

    level: int
    threshold: float
    probability: float
    cumulative_probability: float
    n_seeds: int
    correlation_factor: float
    cov: float
    n_queries: int
    n_failed: int
    acceptance_rate: float = math.nan
    kernel_scale: float = math.nan
    stalled: bool = False


@dataclass(frozen=True)
class LevelState:
    """Where a run stands after one level (:meth:`SubsetSimulation.iter_levels`).

    Attributes
    ----------
    diagnostics : LevelDiagnostics
        The level just finished (level 0: the independent draws).
    n_queries : int
        Model calls made so far.
    n_samples : int
        Samples per level ``N``.
    done : bool
        True for the last state of a run; its ``result`` is the run's :class:`EstimateResult`.
    result : EstimateResult or None
        The run's result (last state only).
    """

    diagnostics: LevelDiagnostics
    n_queries: int
    n_samples: int
    done: bool = False
    result: EstimateResult | None = None

    @property
    def level(self) -> int:
        return self.diagnostics.level

    @property
    def threshold(self) -> float:
        return self.diagnostics.threshold

    @property
    def n_failed(self) -> int:
        """Failed samples among the level's ``N``."""
        return self.diagnostics.n_failed

    @property
    def running_probability(self) -> float:
        """``P_hat_l``, the estimated probability of the level reached (of the failure when it is the last)."""
        return self.diagnostics.cumulative_probability

    @property
    def running_estimate(self) -> float:
        """The failure probability if the run stopped here: ``P_hat_l`` times the level's failed fraction.

        Every failure lies in every level (the exact terminal event), so this never counts a
        sample that has not failed; on the last state it is the result's ``probability``.
        """
        if self.result is not None:
            return self.result.probability
        return self.running_probability * self.n_failed / self.n_samples

    def envelope_lower(self, delta: float = 0.05) -> float:
        """Ville's anytime-valid lower bound ``delta * P_hat_l`` on the level's probability ``P_l``.

        Valid at every level at once, so a user may stop whenever they like (module
        :mod:`scarce.envelope`, paper Theorem 1).
        """
        from scarce.checks import check_in_interval

        return check_in_interval("delta", delta, 0.0, 1.0, low_open=True, high_open=True) * self.running_probability


@dataclass(frozen=True)
class EstimateResult:
    """A failure-probability estimate with its error bars and diagnostics.

    Attributes
    ----------
    method : str
        ``"subset_simulation"``, ``"monte_carlo"``, or a baseline's name.
    probability : float
        The estimate ``P_hat``.
    cov : float
        Estimated coefficient of variation of ``P_hat`` (``inf`` when ``P_hat = 0``).
    n_queries : int
        Model evaluations, every evaluated point counted once.
    n_samples : int
        Samples per level (Monte Carlo: the whole sample).
    n_failed : int
        Failures in the last population.
    reached_failure : bool
        True when the last level is the failure event itself, so ``probability``
        estimates ``P_f``; False for a stalled or budget-stopped run.
    status : str
        Why the run stopped: one of :data:`STATUSES`.
    levels : tuple of LevelDiagnostics
    wall_time : float
        Seconds.
    level_probability : float or None
        Target ``p0`` of Subset Simulation.
    interval : str
        ``"lognormal"`` (Subset Simulation) or ``"clopper-pearson"`` (Monte Carlo).
    problem : str
    info : dict
        Free-form provenance (kernel, seed, ...).
    """

    method: str
    probability: float
    cov: float
    n_queries: int
    n_samples: int
    n_failed: int
    reached_failure: bool
    status: str
    levels: tuple[LevelDiagnostics, ...] = ()
    wall_time: float = 0.0
    level_probability: float | None = None
    interval: str = "lognormal"
    problem: str = ""
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def queries_per_level(self) -> tuple[int, ...]:
        """Queries spent at each level (level 0 first)."""
        return tuple(level.n_queries for level in self.levels)

    @property
    def running_probabilities(self) -> tuple[float, ...]:
        """``P_hat_l`` for levels 1..L (the quantities the envelope bounds)."""
        return tuple(level.cumulative_probability for level in self.levels[1:])

    @property
    def few_chains(self) -> bool:
        """True when a Subset Simulation run moved Markov chains on fewer than
        :data:`scarce.levels.MIN_CHAINS_PER_LEVEL` chains a level (``info["chains_per_level"]``).

        Its reported CoV rests on fewer chains than that estimate needs on deep runs
        (:func:`scarce.levels.auto_level_probability`); a run that ended at level 0 moved none.
        """
        from scarce.levels import MIN_CHAINS_PER_LEVEL

        moved = any(level.n_queries > 0 for level in self.levels[1:])  # a run ended at level 0 has a last row, no calls
        chains = self._chains_per_level()
        return chains is not None and chains < MIN_CHAINS_PER_LEVEL and moved

    def _chains_per_level(self) -> float | None:
        """``info["chains_per_level"]``, or the seeds a level targets for a Subset Simulation result
        stored before that key (:func:`scarce.levels.n_seeds_target`)."""
        from scarce.levels import n_seeds_target

        chains = _count(self.info, "chains_per_level")  # None also for what a file holds that is no count
        if chains is None and "chains_per_level" not in self.info and self.method == "subset_simulation" \
                and self.level_probability:
            chains = float(n_seeds_target(self.n_samples, self.level_probability))
        return chains

    @property
    def thin_evidence(self) -> bool:
        """True when a Markov-chain run's error cannot be measured from its own spread (:attr:`thin_evidence_reason`).

        :meth:`ci` of a flagged run falls back on what the first level's independent draws support.
        """
        return self.thin_evidence_reason is not None

    @property
    def thin_evidence_reason(self) -> str | None:
        """Why the evidence is thin: ``"lineages"``, ``"order"`` or None.

        ``"lineages"``: the failures descend from too few chains, counted at the first level whose
        population held a failure (the origin level), and only when that level had at least
        :data:`THIN_EVIDENCE_MIN_CHAINS` chains (with fewer, a good score's failures also sit in
        one or two chains, so the count tells nothing). The run is flagged when its failures
        descend from

        * one or two chains, whatever the origin level: one draw stumbled into the failure set
          (by chance, under a misleading score) and its copies fill the last levels; or
        * fewer than :data:`THIN_EVIDENCE_CHAIN_FRACTION` of the origin level's chains, when
          that level is a Markov-chain level.  A score that leads to the failure brings a
          level's chains to the failure boundary together, and the failures then appear in many
          of them.

        ``"order"``: the failures first appeared in Markov chains (origin level >= 1), and some
        failure the chains found scored below the boundary of the level it was found in, so the
        score does not order the failure set: the set reaches below the levels, so the levels
        before the origin could hold failures that their chains did not find.  How many a run
        misses there, and how much each would have weighed (a failure found one level earlier
        counts ``1 / p0`` times more), varies from run to run far more than any one run's
        genealogy shows, and the reported CoV falls well short of the spread across runs (the
        documentation's engine benchmark page measures it on a weak score).  Where the failures
        first appeared among level 0's independent draws, there was no earlier level to miss
        them in, and their count is binomial.

        Not flagged, and not yet measured from within a run: under a score that orders the
        failures only partly, a run whose failures first appeared at level 0 still rests on the
        few failures its first Markov-chain levels found, and the level it stops at sorts runs by
        that count. Its CoV can then fall short of the spread across runs (the engine benchmark
        page, "Where a weak score's missing variance lies").
        """
        if not (self.reached_failure and len(self.levels) > 2):
            return None
        lineages = _count(self.info, "failure_lineages")
        chains = _count(self.info, "failure_origin_chains") or 0.0
        origin = _count(self.info, "failure_origin_level") or 0.0
        if lineages is not None and lineages > 0 and chains >= THIN_EVIDENCE_MIN_CHAINS and (
                lineages <= 2 or (origin >= 1 and lineages < THIN_EVIDENCE_CHAIN_FRACTION * chains)):
            return "lineages"
        if origin >= 1 and (_count(self.info, "failures_below_boundary") or 0.0) > 0:
            return "order"
        return None

    @property
    def flags(self) -> tuple[str, ...]:
        """Warnings worth showing next to the number: stalls, budget, unreached failure, thin evidence."""
        out = []
        if not self.reached_failure:
            out.append("failure event not reached")
        if any(level.stalled for level in self.levels):
            out.append("stalled level")
        if self.status == "budget":
            out.append("query budget exhausted")
        if self.status == "max_levels":
            out.append("max_levels reached")
        if self.reached_failure and self.probability > 0 and math.isinf(self.cov):
            out.append("error not measured (CoV infinite, e.g. replicas that agree exactly): the interval "
                       "falls back on the first level's independent draws")
        if self.few_chains:
            from scarce.levels import MIN_CHAINS_PER_LEVEL

            out.append(f"few chains: {self._chains_per_level():g} a level, fewer than {MIN_CHAINS_PER_LEVEL}; the "
                       f"reported CoV can fall short on deep runs")
        if self.info.get("few_particles") is True:
            replicas = max(int(_count(self.info, "n_replicas") or 1), 1)
            out.append(f"few particles: N = {self.n_samples // replicas:,} a "
                       f"replica, k = {self.info.get('n_killed')} killed an iteration; the replicas' interval can "
                       f"cover less than its level")
        pooled = self.info.get("pooled_flags")  # scarce.pooling: the runs' own flags, counted
        if isinstance(pooled, list):
            out.extend(flag for flag in pooled if isinstance(flag, str))
        reason = self.thin_evidence_reason
        if reason == "lineages":
            out.append(f"thin evidence: failures descend from {self.info['failure_lineages']} of "
                       f"{self.info['failure_origin_chains']} chains")
        elif reason == "order":
            out.append(f"thin evidence: the score does not order the failures ({self.info['failures_below_boundary']} "
                       f"of the {self.info.get('failures_found', '?')} the chains found scored below their level's "
                       f"boundary; the first appeared at level {self.info['failure_origin_level']})")
        read_off = (self.levels and not self.levels[1:]) or (not self.levels and self.interval == "clopper-pearson")
        if self.reached_failure and self.n_failed == 0 and read_off:
            bound = -math.expm1(math.log(0.05) / self.n_samples) if self.n_samples > 0 else 1.0  # 1 - 0.05^(1/N)
            out.append(f"no failure in {self.n_samples:,} samples: P <= {bound:.3g} at 95%, one-sided (about 3 / N, "
                       f"the rule of three; the interval is the exact two-sided Clopper-Pearson one)")
        return tuple(out)

    def summary(self, confidence: float = 0.95) -> str:
        """The estimate in two lines: probability, CoV, interval, queries, levels; then any flags.

        A run that did not reach the failure shows its interval ``[0, upper bound]`` and says so.
        A CoV whose interval takes fewer than :data:`FEW_DEGREES_OF_FREEDOM` degrees of freedom
        (:meth:`degrees_of_freedom`) is shown with them.
        """
        from scarce.checks import check_in_interval

        confidence = check_in_interval("confidence", confidence, 0.0, 1.0, high_open=True)  # a float, e.g. of a Fraction
        low, high = self.ci(confidence)
        cov = "inf" if math.isinf(self.cov) else ("nan" if math.isnan(self.cov) else f"{self.cov:.3g}")
        few = self.few_degrees_of_freedom()
        if few is not None:
            cov += f" on {few}"
        n = len(self.levels)
        levels = f", {n} level{'s' if n != 1 else ''}" if n else ""
        line = (f"{self.method}: P = {self.probability:.4g} (CoV {cov}, {confidence:.0%} CI [{low:.3g}, {high:.3g}]), "
                f"{self.n_queries:,} queries{levels}; {self.status}")
        return line + "".join(f"\n  flag: {flag}" for flag in self.flags)

    def __str__(self) -> str:
        return self.summary()

    def ci(self, level: float = 0.95) -> tuple[float, float]:
        """Two-sided confidence interval for the failure probability, within [0, 1].

        * Monte Carlo, and a Subset Simulation run whose failure level came straight from its
          first level (independent draws): exact Clopper-Pearson, which stays honest at an
          estimate of 0 or 1.
        * A run that did not reach the failure event (stalled, budget, ``max_levels``): the
          Clopper-Pearson interval of the first level's failures among its ``N`` independent
          draws.  The failure set lies inside every level, so the last level's probability
          bounds ``P_f`` too, but its estimate is only as good as the chains' exploration: a
          score that leads away from the failure drives it far below ``P_f``.
        * A run with :attr:`thin_evidence`: ``[0, u]`` with ``u`` the larger of the log-normal
          upper bound and the first level's Clopper-Pearson upper bound: the independent draws are
          the only evidence about ``P_f`` that does not rest on the chains having found the
          failures.
        * Otherwise: log-normal with the estimated CoV, for the mean of the estimator's law
          (:func:`scarce.envelope.lognormal_interval`: ``P_hat sqrt(1 + CoV^2) exp(+-q s)``,
          ``s^2 = log(1 + CoV^2)``), its upper end capped at 1.  When the
          run records how many chains its failures descend from (counted at the first level
          that held a failure), the quantile is Student's ``t`` with ``G_eff - 1`` degrees of
          freedom, ``G_eff = (sum w)^2 / sum w^2`` the effective number of lineages (Kish) with
          ``w`` the failures in each (``G``, their plain count, in results that lack it).  The
          CoV (with ``cov_depth`` other than 0, as by default) is a cluster-robust variance over lineages; when a few of them hold most
          failures it rests on those few, and its degrees of freedom follow the effective
          number of clusters, not their count (the small-sample correction of Bell and
          McCaffrey 2002; Imbens and Kolesar 2016). Subset Simulation states the degrees of
          freedom it used in ``info["cov_degrees_of_freedom"]``, and those are used: ``G - 1``
          where its score ordered the failures (none found below a boundary: every level
          resampled them, and unequal lineages are ordinary branching), ``G_eff - 1`` where it
          did not; where the failures first appeared in a Markov-chain level, part of the
          variance comes from the levels before it, measured on about ``N p0`` chains each, and
          the stated figure is Satterthwaite's combination of the two parts. Where the
          chains found failures scoring below a level's boundary, the CoV is at least that of
          their count (``info["cov_below_boundary"]``, :mod:`scarce.estimators.subset`).
        """
        from scarce.checks import check_in_interval

        level = check_in_interval("level", level, 0.0, 1.0, high_open=True)
        fixed = self._interval_without_t(level)
        if fixed is not None:
            return fixed
        lo, hi = lognormal_interval(self.probability, self.cov, level, df=self._degrees_of_freedom())
        if self.thin_evidence:
            upper = clopper_pearson(self.levels[0].n_failed, self.n_samples, level)[1]
            return (0.0, min(1.0, max(hi, upper)))
        return (lo, min(hi, 1.0))

    def _interval_without_t(self, level: float) -> tuple[float, float] | None:
        """:meth:`ci`'s interval where it takes no Student ``t`` quantile; None where it takes one."""
        if self.interval == "clopper-pearson":
            return clopper_pearson(self.n_failed, self.n_samples, level)
        first = self.levels[0] if self.levels else None
        if first is None:
            if not self.reached_failure:
                return (0.0, 1.0)
            if _count(self.info, "cov_degrees_of_freedom") is not None and self.probability > 0.0 \
                    and math.isfinite(self.cov):
                return None  # a result without levels that states its degrees of freedom: pooled runs (scarce.pooling)
            lo, hi = lognormal_interval(self.probability, self.cov, level)
            return (lo, min(hi, 1.0))
        if not self.reached_failure:
            return clopper_pearson(first.n_failed, self.n_samples, level)
        if self._read_off_first_level():
            return clopper_pearson(self.n_failed, self.n_samples, level)
        if self.probability <= 0.0 or not math.isfinite(self.cov):  # e.g. AMLS jumped and saw none
            return (0.0, clopper_pearson(first.n_failed, self.n_samples, level)[1])
        if self.cov == 0.0:  # every counted sample failed: the fraction 1 has no spread to measure ...
            if self.probability == self.n_failed / max(self.n_samples, 1):
                return clopper_pearson(self.n_failed, self.n_samples, level)
            # ... and a product of levels with no spread measured has only level 0's bound
            return (0.0, max(clopper_pearson(first.n_failed, self.n_samples, level)[1], self.probability))
        return None

    def degrees_of_freedom(self) -> float | None:
        """Degrees of freedom of the Student ``t`` quantile :meth:`ci` takes, or None where it takes none.

        None where the interval is not log-normal on a measured CoV: Clopper-Pearson (Monte Carlo,
        an estimate read off the first level, a run that did not reach the failure), and a result
        without a lineage count (a normal quantile). Otherwise the count :meth:`ci` describes
        (``G - 1``, ``G_eff - 1``, Satterthwaite's, or ``R - 1`` for replicas); a thin-evidence
        run's ``[0, u]`` takes for ``u`` the larger of the log-normal upper end on these degrees
        of freedom and the first level's Clopper-Pearson bound. With few of them the CoV is a
        variance measured on a few independent lineages, itself uncertain, and under a score that
        orders the failures only partly it can fall far short of the estimate's error about the
        truth; the interval, widened by the ``t`` quantile, is then the error bar (benchmark pages:
        "The unflagged weak runs' error about the truth").
        """
        return None if self._interval_without_t(0.95) is not None else self._degrees_of_freedom()

    def few_degrees_of_freedom(self) -> str | None:
        """``"1.84 degrees of freedom"`` when :meth:`degrees_of_freedom` is below
        :data:`FEW_DEGREES_OF_FREEDOM` as shown (three significant digits), else None."""
        df = self.degrees_of_freedom()
        if df is None:
            return None
        shown = f"{df:.3g}"
        if float(shown) >= FEW_DEGREES_OF_FREEDOM:
            return None
        return f"{shown} degree{'' if float(shown) == 1.0 else 's'} of freedom"

    def _read_off_first_level(self) -> bool:
        """Whether the estimate is the failed fraction of the first level's independent draws.

        Subset Simulation's failure level then follows level 0 at no cost. Splitting's result has
        the same two levels, and its second can cost nothing too (a kernel that never moved a
        copy), but its estimate carries the product of survival fractions: only an estimate equal
        to ``n_failed / n_samples`` is a binomial count.
        """
        return (len(self.levels) == 2 and self.levels[1].n_queries == 0 and self.n_samples > 0
                and self.probability == self.n_failed / self.n_samples)

    def _degrees_of_freedom(self) -> float | None:
        """``G_eff - 1`` (at least 1) for the interval's ``t`` quantile; None without a lineage count.

        An estimator that states its degrees of freedom (``info["cov_degrees_of_freedom"]``: ``R - 1``
        for a CoV from ``R`` independent replicas; Satterthwaite's for a Subset Simulation run whose
        failures appeared in chains) has those used.
        """
        stated = _count(self.info, "cov_degrees_of_freedom")
        if stated is not None and stated >= 1:
            return stated
        lineages = _count(self.info, "failure_lineages")
        if lineages is None or lineages <= 0:
            return None
        effective = _count(self.info, "failure_lineages_effective")
        count = effective if effective is not None and effective > 0 else lineages
        return max(count - 1.0, 1.0)

    def envelope(self, delta: float = 0.05) -> Envelope:
        """Ville's anytime-valid envelope: with probability >= 1 - delta, ``P_hat_l <= P_l / delta`` at every level.

        ``envelope(delta).lower`` is an anytime-valid lower confidence bound on the
        probability of the last level reached (the failure probability when
        ``reached_failure``).
        """
        return Envelope.from_running(self.running_probabilities, self.probability, delta)

    # -- serialisation -----------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """A plain dict (floats may be inf/nan); see :meth:`to_json` for strict JSON."""
        out = asdict(self)
        out["levels"] = [asdict(level) for level in self.levels]
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EstimateResult:
        """Inverse of :meth:`to_dict`, and of :meth:`to_json` once parsed (its ``"nonfinite"`` map
        restored); accepts the strings "inf", "-inf", "nan" in the float fields and level records (older JSON files).

        A file may hold anything: what is not a result (a missing field, a probability outside
        [0, 1], a negative count or CoV, a ``"nonfinite"`` path that leads nowhere) is refused
        with a :class:`~scarce.errors.ScarceError` naming the field, never loaded as a result.
        """
        from scarce.errors import ScarceError

        if not isinstance(data, dict):
            raise ScarceError(f"EstimateResult.from_dict: expected a dict of fields, got {type(data).__name__}")
        data = copy.deepcopy(data) if "nonfinite" in data else dict(data)
        nonfinite = data.pop("nonfinite", None) or {}
        if not isinstance(nonfinite, dict):
            raise ScarceError(f"EstimateResult.from_dict: nonfinite must map paths to 'inf', '-inf' or 'nan', "
                              f"got {type(nonfinite).__name__}")
        for path, value in nonfinite.items():
            _set_path(data, str(path), value)
        data = _decode_legacy_floats(data)
        known = {f.name for f in fields(cls)}
        unknown, missing = set(data) - known, _REQUIRED - set(data)
        if unknown or missing:
            raise ScarceError(f"EstimateResult.from_dict: unknown keys {sorted(unknown)}, missing keys "
                              f"{sorted(missing)}; allowed: {sorted(known)}")
        _check_fields(data)
        levels = data.pop("levels", ())
        try:
            levels = tuple(LevelDiagnostics(**level) for level in levels)
        except TypeError as exc:
            raise ScarceError(f"EstimateResult.from_dict: levels must be a list of level records ({exc})") from exc
        return cls(levels=levels, **data)

    def to_json(self, **kwargs: Any) -> str:
        """Strict JSON: every number finite, or ``null`` where a float is infinite or undefined.

        Those places are listed in ``"nonfinite"``, a map from their path (``"cov"``,
        ``"levels/3/threshold"``) to ``"inf"``, ``"-inf"`` or ``"nan"``, so :meth:`from_json`
        restores the result exactly while a reader that wants numbers only sees numbers or null.
        """
        if "allow_nan" in kwargs:
            from scarce.errors import ScarceError

            raise ScarceError("to_json writes strict JSON (non-finite floats as null, listed under 'nonfinite'); "
                              "allow_nan cannot be set")
        nonfinite: dict[str, str] = {}
        data = _nullify(self.to_dict(), "", nonfinite)
        if nonfinite:
            data["nonfinite"] = nonfinite
        return json.dumps(data, allow_nan=False, **kwargs)

    @classmethod
    def from_json(cls, text: str) -> EstimateResult:
        """Inverse of :meth:`to_json` (older files with "inf"/"nan" strings read too)."""
        from scarce.errors import ScarceError

        if not isinstance(text, (str, bytes, bytearray)):
            raise ScarceError(f"EstimateResult.from_json: expected JSON text, got {type(text).__name__}")
        try:
            data = json.loads(text)
        except (ValueError, RecursionError) as exc:
            raise ScarceError(f"EstimateResult.from_json: not valid JSON ({type(exc).__name__}: {exc})") from exc
        return cls.from_dict(data)


def _count(info: dict[str, Any], key: str) -> float | None:
    """``info[key]`` as a float when it is a finite real number (not a bool); None otherwise.

    Results read back from files carry whatever the file held; a count that is not a finite
    number (NaN, or an infinite count no run can have) counts as absent rather than breaking
    the flags and the interval.
    """
    number = _as_number(info.get(key))
    return number if number is not None and math.isfinite(number) else None


def _as_number(value: Any) -> float | None:
    """``value`` as a float when it is a number JSON reads (an int or float, np.float64 included;
    not a bool), else None; an integer beyond any float is no number a run writes."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        return float(value)
    except OverflowError:
        return None


def _nullify(value: Any, path: str, nonfinite: dict[str, str]) -> Any:
    """``value`` with every non-finite float replaced by None, its path recorded in ``nonfinite``."""
    if isinstance(value, float) and not math.isfinite(value):
        nonfinite[path] = "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
        return None
    if isinstance(value, dict):
        return {k: _nullify(v, f"{path}/{k}" if path else str(k), nonfinite) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_nullify(v, f"{path}/{i}", nonfinite) for i, v in enumerate(value)]
    return value


#: Fields a stored result must hold (the others have defaults).
_REQUIRED = frozenset({"method", "probability", "cov", "n_queries", "n_samples", "n_failed", "reached_failure",
                       "status"})


def _set_path(data: Any, path: str, value: Any) -> None:
    """Put the float ``value`` ("inf", "-inf" or "nan") at ``path`` ("levels/3/threshold") in nested dicts and lists."""
    from scarce.errors import ScarceError

    if value not in ("inf", "-inf", "nan"):
        raise ScarceError(f"EstimateResult.from_dict: nonfinite[{path!r}] must be 'inf', '-inf' or 'nan', got {value!r}")
    *parents, last = path.split("/")
    try:
        for part in parents:
            data = data[int(part)] if isinstance(data, list) else data[part]
        if isinstance(data, list):
            data[int(last)] = float(value)
        elif isinstance(data, dict) and last in data:
            data[last] = float(value)
        else:
            raise KeyError(last)
    except (KeyError, IndexError, ValueError, TypeError) as exc:
        raise ScarceError(f"EstimateResult.from_dict: nonfinite path {path!r} names no field of the result") from exc


def _check_fields(data: dict[str, Any]) -> None:
    """Refuse stored fields no estimator writes: the checks :meth:`EstimateResult.from_dict` makes."""
    from scarce.errors import ScarceError

    def real(name: str, low: float, high: float, nan: bool = False) -> None:
        value = data[name]
        if not _is_real(value, low, high, nan):
            raise ScarceError(f"EstimateResult.from_dict: {name} must be a number in [{low:g}, {high:g}], got "
                              f"{show(value)}")

    real("probability", 0.0, 1.0)
    real("cov", 0.0, math.inf, nan=True)
    for name in ("n_queries", "n_samples", "n_failed"):
        if isinstance(data[name], bool) or not isinstance(data[name], int) or data[name] < 0:
            raise ScarceError(f"EstimateResult.from_dict: {name} must be an integer >= 0, got {show(data[name])}")
    if not isinstance(data["reached_failure"], bool):
        raise ScarceError(f"EstimateResult.from_dict: reached_failure must be true or false, got {data['reached_failure']!r}")
    for name, allowed in (("method", None), ("status", STATUSES), ("interval", INTERVALS), ("problem", None)):
        value = data.get(name, "lognormal" if name == "interval" else "")
        if not isinstance(value, str) or (allowed is not None and value not in allowed):
            raise ScarceError(f"EstimateResult.from_dict: {name} must be "
                              f"{'one of ' + str(allowed) if allowed else 'a string'}, got {show(value)}")
    if data.get("level_probability") is not None:
        real("level_probability", 0.0, 1.0)
    if not isinstance(data.get("info", {}), dict) or not isinstance(data.get("levels", []), (list, tuple)):
        raise ScarceError("EstimateResult.from_dict: info must be a dict and levels a list")
    _check_counted_interval(data)
    for index, level in enumerate(data.get("levels", [])):
        _check_level(index, level, data["n_samples"])


#: What :meth:`EstimateResult.ci` can be asked to build: values of ``EstimateResult.interval``.
INTERVALS = ("lognormal", "clopper-pearson")


def _is_real(value: Any, low: float, high: float, nan: bool = False) -> bool:
    """Whether ``value`` is a number (:func:`_as_number`) in ``[low, high]``, or NaN where ``nan`` allows it."""
    number = _as_number(value)
    return number is not None and ((nan and math.isnan(number)) or low <= number <= high)


def _check_counted_interval(data: dict[str, Any]) -> None:
    """A Clopper-Pearson interval is the failed fraction's: the estimate must be that fraction."""
    from scarce.errors import ScarceError

    if data.get("interval") != "clopper-pearson":
        return
    if data["n_failed"] > data["n_samples"] or (data["n_samples"] > 0 and not math.isclose(
            data["probability"], data["n_failed"] / data["n_samples"], rel_tol=1e-9, abs_tol=1e-300)):
        raise ScarceError(f"EstimateResult.from_dict: probability={data['probability']!r} is not the failed fraction "
                          f"n_failed / n_samples = {data['n_failed']} / {data['n_samples']} that its Clopper-Pearson "
                          f"interval is built on")


_LEVEL_COUNTS = ("level", "n_seeds", "n_queries", "n_failed")
#: What a level record's fields must be, as :func:`_check_level` says it (the others: numbers).
_LEVEL_KINDS = {**dict.fromkeys(_LEVEL_COUNTS, "an integer >= 0"), "stalled": "true or false"}


def _check_level(index: int, level: Any, n_samples: int) -> None:
    """A level record must hold counts where :class:`LevelDiagnostics` has counts (its failures at
    most ``n_samples``, a population's size), numbers elsewhere, a bool ``stalled``."""
    from scarce.errors import ScarceError

    if not isinstance(level, dict):
        raise ScarceError(f"EstimateResult.from_dict: levels[{index}] must be a level record, got {type(level).__name__}")
    for name, value in level.items():
        if name in _LEVEL_COUNTS:  # numbers.Integral: an int, or a NumPy integer
            ok = isinstance(value, numbers.Integral) and not isinstance(value, bool) and value >= 0
        elif name == "stalled":
            ok = isinstance(value, (bool, np.bool_))
        else:
            ok = _is_real(value, -math.inf, math.inf, nan=True)
        if not ok:
            raise ScarceError(f"EstimateResult.from_dict: levels[{index}].{name} must be "
                              f"{_LEVEL_KINDS.get(name, 'a number')}, got {show(value)}")
    if isinstance(level.get("n_failed"), numbers.Integral) and level["n_failed"] > n_samples:
        raise ScarceError(f"EstimateResult.from_dict: levels[{index}].n_failed={level['n_failed']} exceeds "
                          f"n_samples={n_samples}, the size of a level's population")


#: The result's float fields, where older files wrote a non-finite float as a string.
_FLOAT_FIELDS = ("probability", "cov", "wall_time", "level_probability")


def _decode_legacy_floats(data: dict[str, Any]) -> dict[str, Any]:
    """The strings "inf", "-inf" and "nan" read as floats where a float belongs (older files wrote them so).

    Only in the float fields of the result and of its level records (whose fields are all
    numbers): a string field that happens to read "nan" (a problem of that name) or a string in
    ``info`` stays the string it was.
    """
    def decoded(value: Any) -> Any:
        return float(value) if isinstance(value, str) and value in ("inf", "-inf", "nan") else value

    data = {key: decoded(value) if key in _FLOAT_FIELDS else value for key, value in data.items()}
    if isinstance(data.get("levels"), list):
        data["levels"] = [{key: decoded(value) for key, value in level.items()} if isinstance(level, dict) else level
                          for level in data["levels"]]
    return data
