r"""Leave-one-style-out transfer of LLM rulers between attack styles.

Rulers and their thresholds are fitted on one attack style plus the benign records, then used
on every other style, as an evaluator would use rulers fitted on the attacks they have seen on
an attack they have not. For each applied style (pooled, and per target model where the style
has at least ``min_records`` records and ``min_jailbreaks`` jailbreaks), each ruler variant and
each adversarial fraction ``eta``, one cell reports:

* ``recall``: the applied records' jailbreaks scoring at or above the fitted threshold ``tau``
  (0 means the surrogate event ``A_tau`` never holds a jailbreak of that style and ``C_tau``
  is undefined);
* ``C_tau`` twice: **inherited** (precision over recall on the fitting style's records) and
  **refit** (on the applied records, which an evaluator with a few labelled examples of the
  new style can do);
* ``exact``: ``P(A_tau) C_tau / p_ref`` with the exact fleet probability of ``A_tau``
  (:meth:`~scarce.applications.llm.fleet.Fleet.surrogate_probability`): the error left when the
  cascade is perfect, so calibration and leakage are separated from the cascade's own error;
* ``error``: mean ``|r - 1|`` over ``n_runs`` Subset Simulation runs, ``r = p_hat C_tau / p_ref``,
  for both calibrations.

What the rulers see (``view``). A corpus embedded with ``parts="separate"`` holds
``[z_prompt, z_response]`` (:class:`~scarce.encoders.text.SentenceEncoder`). The prompt carries
the attack style (a role-play template, an optimised suffix, a rewritten request), which is
exactly what does not carry over to a style the rulers were not fitted on; the response is what
the judge judges, whatever the style. So by default (``"auto"``) the transfer's rulers see the
response half of such a corpus and the whole vector of any other; ``"response"`` insists on the
half, ``"conversation"`` takes the whole vector.

``p_ref = eta * (jailbreak rate of the applied records)``. Seeds are
``SeedSequence([seed, crc32(cell key)])``: the same numbers however the cells are ordered.
"""

from __future__ import annotations

import math
import re
import warnings
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from scarce.applications.llm.corpus import benign_mask, check_corpus, group_mask, group_names
from scarce.applications.llm.fleet import Fleet, check_eta, reference_probability
from scarce.checks import check_in_interval, check_positive_int, warn_user
from scarce.errors import ScarceError, ScarceWarning, unknown_name_error
from scarce.experiments.settings import task_seed
from scarce.levels import check_level_sizes

__all__ = ["TransferConfig", "VIEWS", "best_per_pair", "transfer_matrix"]

#: Values of ``TransferConfig(view=...)``: what part of each embedding the rulers see.
VIEWS = ("auto", "response", "conversation")


@dataclass(frozen=True)
class TransferConfig:
    """What the transfer matrix covers and how each cell is estimated."""

    styles: tuple[str, ...] = ("PAIR", "GCG", "JBC", "DSN")
    variants: tuple[str, ...] = tuple(f"{f}_p{p}" for f in ("pc1", "centroid", "fisher", "logreg", "mah_bad",
                                                            "centroid_rot90") for p in (50, 75))
    etas: tuple[float, ...] = (1e-3,)
    n_samples: int = 20_000
    n_runs: int = 20
    min_records: int = 20
    min_jailbreaks: int = 5
    level_probability: float = 0.1
    stop_factor: float = 0.5
    seed: int = 0
    view: str = "auto"
    # cascade levels broken inside each fleet record (scarce.applications.llm.fleet, Ties)
    tie_break: bool = True

    def __post_init__(self) -> None:
        from scarce.checks import check_choice
        from scarce.rulers import available_rulers

        object.__setattr__(self, "view", check_choice("view", self.view, VIEWS))
        if not isinstance(self.tie_break, (bool, np.bool_)):
            raise ScarceError(f"tie_break must be True or False, got {self.tie_break!r}")

        if len(self.styles) < 2 or len(set(self.styles)) != len(self.styles):
            raise ScarceError(f"styles must name at least two distinct attack styles, got {list(self.styles)!r}")
        for variant in self.variants:
            if not re.fullmatch(r".+_p\d+", str(variant)):
                raise ScarceError(f"variants are rulers at a percentile, <family>_p<percentile> (e.g. "
                                  f"'fisher_p75'); got {variant!r}")
            if variant not in available_rulers("llm"):
                raise unknown_name_error("ruler in variants", variant, available_rulers("llm"))
        object.__setattr__(self, "etas", _check_etas(self.etas))
        for name in ("n_runs", "min_records", "min_jailbreaks"):
            object.__setattr__(self, name, check_positive_int(name, getattr(self, name)))
        object.__setattr__(self, "seed", check_positive_int("seed", self.seed, minimum=0))
        n_samples, p0 = check_level_sizes(self.n_samples, self.level_probability)
        object.__setattr__(self, "n_samples", n_samples)
        object.__setattr__(self, "level_probability", p0)
        object.__setattr__(self, "stop_factor", check_in_interval("stop_factor", self.stop_factor, 0.0, 1.0))


def _check_etas(etas: Any) -> tuple[float, ...]:
    """``etas`` as a non-empty tuple of distinct fractions in (0, 1], or a :class:`ScarceError`.

    Checked with the fleet's :func:`~scarce.applications.llm.fleet.check_eta`; a value listed
    twice would run its cells twice and put two rows of one cell in the table.
    """
    if isinstance(etas, str) or not isinstance(etas, (tuple, list)) or not etas:
        raise ScarceError(f"etas must list at least one adversarial fraction in (0, 1], got {etas!r}")
    values = tuple(check_eta(e) for e in etas)
    twice = next((v for i, v in enumerate(values) if v in values[:i]), None)
    if twice is not None:
        raise ScarceError(f"etas holds the same value twice: {twice!r} (in {list(etas)!r}); list each value once")
    return values


def _split(variant: str) -> tuple[str, int]:
    family, _, p = variant.rpartition("_p")
    return family, int(p)


def ruler_view(frame: Any, Z: np.ndarray, view: str) -> tuple[np.ndarray, str]:
    """The coordinates the rulers see, and the view taken (``"response"`` or ``"conversation"``).

    Raises
    ------
    ScarceError
        ``view="response"`` on a corpus whose embedding is not the ``[prompt, response]`` pair of
        ``parts="separate"`` (read from ``frame.attrs["embedding"]``).
    """
    import json

    info = frame.attrs.get("embedding") if hasattr(frame, "attrs") else None
    try:
        parts = json.loads(info["identity"]).get("parts") if isinstance(info, dict) else None
    except (TypeError, ValueError, KeyError, AttributeError):
        parts = None
    recorded = info.get("dimension", Z.shape[1]) if isinstance(info, dict) else Z.shape[1]
    separate = parts == "separate" and recorded == Z.shape[1] and Z.shape[1] % 2 == 0
    if view == "conversation" or (view == "auto" and not separate):
        return Z, "conversation"
    if not separate:
        found = (f"records parts={parts!r}" if parts != "separate" else
                 f"records parts='separate' with dimension {recorded!r}, but its vectors have {Z.shape[1]} "
                 f"coordinates (changed after embedding?)")
        raise ScarceError(f"view='response' needs a corpus embedded with the prompt and the response apart "
                          f"(SentenceEncoder parts='separate'); this corpus's embedding {found}. "
                          f"Allowed here: view='conversation' or 'auto'")
    response = Z[:, Z.shape[1] // 2:]
    empty = int((~response.any(axis=1)).sum())
    if empty:  # the encoder gives a record without a response an all-zero half
        warn_user(f"{empty} record(s) have no response: under view='response' the rulers see them all as "
                  f"one point (the origin); view='conversation' keeps their prompts apart",
                  ScarceWarning)
    return response, "response"


def _fit(Z: np.ndarray, y: np.ndarray, fit: np.ndarray, variants: tuple[str, ...]) -> dict[str, tuple[np.ndarray, float]]:
    """Per variant: scores of every record and the threshold, from rulers fitted on ``fit``."""
    from scarce.rulers import make_ruler

    out, fitted = {}, {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ScarceWarning)
        for variant in variants:
            family, percentile = _split(variant)
            if family not in fitted:
                ruler = make_ruler(family).fit(Z[fit], y[fit])
                fitted[family] = (ruler, ruler.score_samples(Z))
            ruler, scores = fitted[family]
            out[variant] = (scores, float(ruler.threshold(percentile)))
    return out


def _applied_groups(frame: Any, style: str, y: np.ndarray, config: TransferConfig) -> list[str]:
    """The applied style pooled, and its target-model groups with enough records and jailbreaks."""
    groups = [style]
    for group in group_names(frame, style):
        rows = group_mask(frame, group)
        if rows.sum() >= config.min_records and y[rows].sum() >= config.min_jailbreaks and group != style:
            groups.append(group)
    return groups


def _calibration(scores: np.ndarray, labels: np.ndarray, tau: float) -> tuple[float, float]:
    """``(C_tau, recall)`` on labelled records; ``C_tau`` is NaN at recall 0."""
    from scarce.calibration import precision_recall

    precision, recall = precision_recall(scores, labels.astype(int), tau)
    return (float(precision / recall) if recall > 0 else math.nan), float(recall)


def _cell(fleet: Fleet, tau: float, refit: float, inherited: float, p_ref: float, config: TransferConfig,
          seed: np.random.SeedSequence) -> dict[str, float]:
    """Cascade runs on the fleet's surrogate event, read with both calibrations."""
    from scarce.estimators import SubsetSimulation

    surrogate = fleet.surrogate_probability(tau)
    out = {"surrogate_exact": surrogate, "benign_mass": fleet.leakage(tau)[0],
           "exact_refit": surrogate * refit / p_ref, "exact_inherited": surrogate * inherited / p_ref}
    if surrogate == 0.0 or not math.isfinite(refit):  # nothing to estimate, or no calibration
        return out | {"error_refit": math.nan, "bias_refit": math.nan, "error_inherited": math.nan,
                      "mean_queries": math.nan}
    estimator = SubsetSimulation(n_samples=config.n_samples, level_probability=config.level_probability,
                                 max_levels=60, stop_factor=config.stop_factor)
    problem = fleet.problem(tau, tie_break=bool(config.tie_break))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ScarceWarning)
        results = [estimator.estimate(problem, seed=child) for child in seed.spawn(config.n_runs)]
    p = np.array([r.probability for r in results])
    return out | {"error_refit": float(np.mean(np.abs(p * refit / p_ref - 1))),
                  "bias_refit": float(abs(np.mean(p) * refit / p_ref - 1)),
                  "error_inherited": float(np.mean(np.abs(p * inherited / p_ref - 1)))
                  if math.isfinite(inherited) else math.nan,
                  "mean_queries": float(np.mean([r.n_queries for r in results]))}


def transfer_matrix(corpus: Any, config: TransferConfig | None = None, *,
                    log: Callable[[str], None] | None = None) -> Any:
    """The leave-one-style-out transfer table of an embedded corpus (a pandas frame, one row per cell).

    Raises
    ------
    ScarceError
        No embeddings, ``view="response"`` on a corpus not embedded in two parts, no benign
        records, a style with no records in the corpus (the message
        lists the styles it has), or a style whose records and the benign ones are all of one
        label (nothing to fit).
    """
    import pandas as pd

    from scarce.applications.llm.embedding import embedding_matrix

    config = config or TransferConfig()
    frame = check_corpus(corpus, require_embedding=True)
    Z, y, benign = embedding_matrix(frame), frame["jailbroken"].to_numpy(bool), benign_mask(frame)
    Z, view = ruler_view(frame, Z, config.view)
    if not benign.any():
        raise ScarceError("the corpus has no benign records (method 'none'): a fleet needs benign users")
    methods = frame["method"].astype(str).to_numpy()
    present = sorted(set(methods[~benign]))
    for style in config.styles:
        if style not in present:
            raise ScarceError(f"style {style!r} has no records in the corpus; its attack styles are {present}")
    rows = []
    for source in config.styles:
        fit = (methods == source) | benign
        if y[fit].all() or not y[fit].any():
            raise ScarceError(f"style {source!r} plus the benign records are all of one label: no ruler can be fitted")
        fitted = _fit(Z, y, fit, config.variants)
        if log is not None:
            log(f"fitted {len(config.variants)} variants on {source} + benign ({int(fit.sum())} records)")
        for applied in (s for s in config.styles if s != source):
            for group in _applied_groups(frame, applied, y, config):
                rows += _group_cells(fitted, source, group, group_mask(frame, group), methods == source,
                                     benign, y, config)
    return pd.DataFrame(rows).assign(view=view)


def _group_cells(fitted: dict[str, tuple[np.ndarray, float]], source: str, group: str, rows: np.ndarray,
                 source_rows: np.ndarray, benign: np.ndarray, y: np.ndarray, config: TransferConfig) -> list[dict]:
    out = []
    labels = y[rows]
    if not labels.any():
        return out
    for variant, (scores, tau) in fitted.items():
        refit, recall = _calibration(scores[rows], labels, tau)
        inherited, source_recall = _calibration(scores[source_rows], y[source_rows], tau)
        for eta in config.etas:
            p_ref = reference_probability(labels, eta, seed=zlib.crc32(group.encode())).probability
            key = f"{source}->{group}-{variant}-eta{eta!r}"
            seed = task_seed(config.seed, key)
            fleet = Fleet.from_scores(scores[benign], scores[rows], eta)
            out.append({"fitted": source, "applied": group, "records": int(rows.sum()),
                        "jailbreaks": int(labels.sum()), "variant": variant, "eta": eta, "threshold": tau,
                        "recall": recall, "source_recall": source_recall, "factor_refit": refit,
                        "factor_inherited": inherited, "p_ref": p_ref,
                        **_cell(fleet, tau, refit, inherited, p_ref, config, seed)})
    return out


def best_per_pair(table: Any) -> Any:
    """Per (fitted style, applied group, eta): the variant with the smallest refit error, and the
    variants whose threshold no jailbreak of the applied records reaches (recall 0).

    ``best_error_refit`` is mean ``|r - 1|`` over the runs and ``best_bias_refit`` the distance of
    their mean ratio from 1; ``refit_better`` compares the best variant's two calibrations.
    """
    import pandas as pd

    rows = []
    for (fitted, applied, eta), cells in table.groupby(["fitted", "applied", "eta"], sort=False):
        usable = cells[np.isfinite(cells.error_refit)]
        zero = sorted(cells.variant[cells.recall == 0])
        row = {"fitted": fitted, "applied": applied, "eta": eta, "records": int(cells.records.iloc[0]),
               "jailbreaks": int(cells.jailbreaks.iloc[0]), "recall_zero": ", ".join(zero) or "-",
               "n_recall_zero": len(zero), "n_variants": len(cells), "best": "none: no calibration"}
        if len(usable):
            best = usable.loc[usable.error_refit.idxmin()]
            row |= {"best": best.variant, "recall": best.recall, "best_error_refit": best.error_refit,
                    "best_bias_refit": best.bias_refit, "best_error_inherited": best.error_inherited,
                    "exact_refit": best.exact_refit, "exact_inherited": best.exact_inherited,
                    "refit_better": bool(best.error_refit < best.error_inherited)
                    if math.isfinite(best.error_inherited) else True}
        rows.append(row)
    return pd.DataFrame(rows)
