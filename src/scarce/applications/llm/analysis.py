"""What an LLM sweep measured, as tables built from its result store alone (pandas frames that
:mod:`scarce.reporting.llm` renders).

Errors follow the paper (section 6, appendices ``app:llm-ranking`` and ``app:gcg-transfer``).
For one cascade run of a cell the calibrated estimate is ``p_hat = P_hat(A_tau) * C_tau`` and
its ratio to the reference is ``r = p_hat / p_ref``; a cell's error is the mean of ``|r - 1|``
over its runs (``|mean r - 1|``, the bias of the averaged estimate, is kept beside it). A cell
whose calibration is undefined (no labelled jailbreak above ``tau``) has error ``inf``.

* **Family ranking** (``tab:selector-family-truth``): per family the percentile variant with the
  lowest mean error over groups x ``eta >= ranking_min_eta`` (the ``eta = 1e-4`` cells are
  dominated by finite-sample discreteness and excluded, as in the paper), with the worst-group
  directional ``KL(p_good || p_bad)`` and Cohen's d of the family's scores.
* **Selector robustness** (``tab:selector-cv``): every registered metric x {worst, mean}
  aggregation against the family errors: Spearman rho, asymptotic and exact permutation p,
  leave-one-family-out and leave-one-group-out minima. ``p_good`` of a group is the benign
  records plus the group's non-jailbroken ones, ``p_bad`` the group's jailbreaks.
* **Transfer** (``tab:gcg-transfer``): the transfer cells' estimates with the source-inherited
  and the target-refitted calibration, the refit 95% interval of the mean over runs, and the
  ratios to the target ``p_ref``.
* The **reference's** own uncertainty: the mean bootstrap relative half-width of ``p_ref`` over
  the cells the headline error averages.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from scarce.applications.llm.sweep import expected_cell_keys, selector_scores
from scarce.selection.bias import leakage_relative_bias

__all__ = ["analyse", "cell_rows", "family_table", "headline", "main_cells", "n_sweep_table", "selector_scores",
           "selector_table", "threshold_table", "transfer_table"]


def _ratios(p: np.ndarray, factor: float, p_ref: float) -> np.ndarray:
    if not math.isfinite(factor):
        return np.full(p.size, math.inf)
    return p * factor / p_ref


def _run_summary(ratios: np.ndarray, prefix: str = "") -> dict[str, float]:
    finite = np.isfinite(ratios).all()
    return {
        f"{prefix}mean_r": float(ratios.mean()) if finite else math.inf,
        f"{prefix}error": float(np.abs(ratios - 1).mean()) if finite else math.inf,
        f"{prefix}bias": float(abs(ratios.mean() - 1)) if finite else math.inf,
        f"{prefix}worst_run_error": float(np.abs(ratios - 1).max()) if finite else math.inf,
        # What mean |r - 1| would be for an unbiased estimate with this spread (Gaussian r):
        # an error near it is cascade noise, not ruler bias.
        f"{prefix}noise_floor": float(math.sqrt(2 / math.pi) * ratios.std(ddof=1))
        if finite and ratios.size > 1 else math.nan,
    }


def _key_matches(key: str, payload: dict[str, Any]) -> bool:
    """Whether a cell is stored under the key its contents give; warns and skips it otherwise.

    A cell stored under another key (e.g. by a sweep that wrote eta with one significant digit,
    so that ``eta=1.5e-3`` landed in the file of ``2e-3``) would be reported under a wrong name.
    """
    from scarce.applications.llm.sweep import _cell_key
    from scarce.checks import warn_user
    from scarce.errors import ScarceError, ScarceWarning

    try:
        stage = "transfer" if payload["stage"] == "transfer" else "cell"
        expected = _cell_key(stage, payload["family"], payload["percentile"], payload["group"],
                             payload["eta"], payload["n_samples"])
    except (KeyError, TypeError, ValueError, ScarceError):
        expected = None
    if expected == key:
        return True
    warn_user(f"task file {key!r} holds the cell {expected!r}; it is left out of the report "
              "(delete it and rerun the sweep to compute that cell under its own key)",
              ScarceWarning)
    return False


def cell_rows(store: Any) -> Any:
    """One row per finished cell (main grid, ``N`` sweep, transfer) as a pandas frame."""
    import pandas as pd

    rows = []
    for key, payload, timing in store.timed_items():
        if payload.get("kind") != "cell" or not _key_matches(key, payload):
            continue
        runs = payload["runs"]
        # seconds per run: stored apart from the results (older run directories kept them in each run)
        seconds = timing.get("run_seconds") or [run.get("seconds", math.nan) for run in runs]
        p = np.array([run["p"] for run in runs], float)
        ratios = _ratios(p, payload["factor"], payload["p_ref"])
        eta, pb, ph = payload["eta"], payload["benign_mass"], payload["harmful_mass"]
        row = {
            "key": key, "stage": payload["stage"], "family": payload["family"],
            "percentile": payload["percentile"], "variant": payload["variant"],
            "group": payload["group"], "eta": eta, "n_samples": payload["n_samples"],
            "n_runs": len(runs), "threshold": payload["threshold"], "factor": payload["factor"],
            "p_ref": payload["p_ref"], "p_ref_low": payload["p_ref_interval"][0],
            "p_ref_high": payload["p_ref_interval"][1],
            "p_ref_rel_half_width": payload["p_ref_rel_half_width"],
            "jailbreak_rate": payload["jailbreak_rate"], "surrogate_exact": payload["surrogate_exact"],
            "mean_surrogate": float(p.mean()), "sd_surrogate": float(p.std(ddof=1)) if p.size > 1 else math.nan,
            "mean_reported_cov": float(np.mean([run["cov"] for run in runs])),
            "benign_mass": pb, "harmful_mass": ph,
            # The paper's bias decomposition (eq. selector-bias-decomp): (1-eta)/eta * P_b/P_h.
            "leakage_bias": float(leakage_relative_bias(eta, pb, ph)) if ph > 0 else math.inf,
            "queries": float(np.mean([run["queries"] for run in runs])),
            "seconds": float(np.mean(seconds)),
            "levels": float(np.mean([run["levels"] for run in runs])),
            "reached": float(np.mean([run["reached"] for run in runs])),
            **_run_summary(ratios),
        }
        if "factor_inherited" in payload:
            row["factor_inherited"] = payload["factor_inherited"]
            row.update(_run_summary(_ratios(p, payload["factor_inherited"], payload["p_ref"]),
                                    prefix="inherited_"))
        rows.append(row)
    frame = pd.DataFrame(rows)
    if not frame.empty:
        frame = frame.sort_values(["stage", "family", "percentile", "group", "eta", "n_samples"],
                                  kind="stable").reset_index(drop=True)
    return frame


def main_cells(cells: Any, config: dict[str, Any], min_eta: float | None = None) -> Any:
    """The main-grid cells (``N = n_samples``, the configured percentiles, ``eta >= min_eta``)."""
    part = cells[(cells.stage != "transfer") & (cells.n_samples == config["n_samples"])]
    part = part[part.percentile.isin(config["percentiles"])]
    if min_eta is not None:
        part = part[part.eta >= min_eta]
    return part


def family_table(cells: Any, setup: dict[str, Any], config: dict[str, Any]) -> Any:
    """The ground-truth family ranking with worst-group directional KL and Cohen's d."""
    import pandas as pd

    from scarce.selection import family_ranking, metric_values, selector_values

    part = main_cells(cells, config, config["ranking_min_eta"])
    if part.empty:
        return pd.DataFrame()
    ranking = family_ranking(part.family, part.variant, part.error)
    values = metric_values(selector_scores(setup), ["kl_good_bad", "cohens_d"])
    kl = selector_values(values["kl_good_bad"], "kl_good_bad", "worst")
    d = selector_values(values["cohens_d"], "cohens_d", "mean")
    rows = []
    for r in ranking:
        best = part[part.variant == r.best_variant]
        rows.append({"family": r.family, "best_variant": r.best_variant, "mean_error": r.mean_error,
                     "worst_error": r.worst_error, "cells": r.n_cells,
                     "worst_group": best.loc[best.error.idxmax(), "group"] if len(best) else "",
                     "noise_floor": float(best.noise_floor.mean()),
                     "worst_kl": kl.get(r.family, math.nan), "cohens_d": d.get(r.family, math.nan),
                     "seconds": float(best.seconds.mean()), "queries": float(best.queries.mean())})
    return pd.DataFrame(rows)


def selector_table(families: Any, setup: dict[str, Any], *, seed: int = 0) -> Any:
    """Selector robustness: every metric x aggregation, best rho first (needs >= 3 families)."""
    import pandas as pd

    from scarce.selection import metric_spec, selector_robustness

    if len(families) < 3 or not np.isfinite(families.mean_error).any():
        return pd.DataFrame()
    errors = dict(zip(families.family, families.mean_error, strict=True))
    stored = setup.get("selector_metrics")  # computed once with the set-up (runs made since it was added)
    scores = None if stored else {f: g for f, g in selector_scores(setup).items() if f in errors}
    rows = []
    for v in selector_robustness(scores, errors, seed=seed, values=stored or None):
        rows.append({"metric": v.metric, "formula": metric_spec(v.metric).formula,
                     "aggregation": v.aggregation, "rho": v.rho, "p": v.p_asymptotic,
                     "p_permutation": v.p_permutation,
                     "p_permutation_two_sided": v.p_permutation_two_sided,
                     "lofo_min": v.lofo_min, "logo_min": v.logo_min,
                     "rho_low": v.bootstrap_interval[0], "rho_high": v.bootstrap_interval[1],
                     "selected": max(v.selector, key=lambda f: (1 if metric_spec(v.metric).higher_is_better else -1) * v.selector[f])})
    return pd.DataFrame(rows)


def transfer_table(cells: Any) -> Any:
    """Transfer cells: inherited vs refitted calibration against the target ``p_ref``."""
    part = cells[cells.stage == "transfer"].copy()
    if part.empty:
        return part
    z = 1.959963984540054
    half = z * part.sd_surrogate / np.sqrt(part.n_runs)
    part["refit_p"] = part.mean_surrogate * part.factor
    part["refit_low"] = (part.mean_surrogate - half).clip(lower=0) * part.factor
    part["refit_high"] = (part.mean_surrogate + half) * part.factor
    part["inherited_p"] = part.mean_surrogate * part.factor_inherited
    part["refit_ratio"] = part.refit_p / part.p_ref
    part["inherited_ratio"] = part.inherited_p / part.p_ref
    part["improvement"] = part.inherited_error / part.error
    return part.sort_values(["eta", "family"], ascending=[False, True]).reset_index(drop=True)


def n_sweep_table(cells: Any, config: dict[str, Any]) -> Any:
    """Mean error and time per run against ``N`` (the ``n_grid_percentile`` variants)."""
    part = cells[(cells.stage != "transfer") & (cells.percentile == config["n_grid_percentile"])
                 & cells.n_samples.isin(config["n_grid"]) & (cells.eta >= config["ranking_min_eta"])]
    return (part.groupby(["family", "n_samples"], sort=True)
            .agg(error=("error", "mean"), bias=("bias", "mean"), seconds=("seconds", "mean"),
                 queries=("queries", "mean"), cells=("error", "size")).reset_index())


def threshold_table(cells: Any, config: dict[str, Any]) -> Any:
    """Per family, percentile and ``eta``: mean error over groups, time per run and leakage."""
    part = main_cells(cells, config)
    return (part.groupby(["family", "percentile", "eta"], sort=True)
            .agg(error=("error", "mean"), bias=("bias", "mean"), seconds=("seconds", "mean"),
                 queries=("queries", "mean"), benign_mass=("benign_mass", "mean"),
                 leakage_bias=("leakage_bias", "mean")).reset_index())


def headline(cells: Any, families: Any, config: dict[str, Any]) -> dict[str, Any]:
    """The best family's mean error next to the reference's mean bootstrap relative half-width."""
    if families.empty:
        return {}
    best = families.iloc[0]
    part = main_cells(cells, config, config["ranking_min_eta"])
    part = part[part.variant == best.best_variant]
    return {"best_variant": best.best_variant, "mean_error": float(best.mean_error),
            "worst_error": float(best.worst_error), "cells": int(best.cells),
            "reference_rel_half_width": float(part.p_ref_rel_half_width.mean()),
            "min_eta": config["ranking_min_eta"]}


def analyse(store: Any, *, seed: int = 0) -> dict[str, Any]:
    """Every table of a sweep's report from its store alone (``seed`` drives the selector bootstrap).

    Returns a dict with the ``config``, the set-up's ``info`` and ``groups``, the ``cells`` frame,
    the store keys of the grid's cells that are ``missing`` (never written, or unreadable),
    its ``main`` grid, and the ``families``, ``selectors``, ``transfer``, ``headline``,
    ``n_sweep`` and ``thresholds`` tables.

    Raises
    ------
    ScarceError
        The store holds no finished set-up, or no finished cell.
    """
    from scarce.errors import ScarceError

    config = store.config
    setup = store.load("setup")
    if setup is None:
        raise ScarceError(f"{str(store.root)!r} holds no finished set-up; run 'scarce llm sweep' first")
    cells = cell_rows(store)
    if cells.empty:
        raise ScarceError(f"{str(store.root)!r} holds no finished cell yet; run 'scarce llm sweep' first")
    families = family_table(cells, setup, config)
    expected = expected_cell_keys(config, setup["groups"])
    missing = sorted(expected - set(cells.key)) if expected is not None else []
    return {"config": config, "info": setup["info"], "groups": setup["groups"], "cells": cells, "missing": missing,
            "main": main_cells(cells, config), "families": families,
            "selectors": selector_table(families, setup, seed=seed), "transfer": transfer_table(cells),
            "headline": headline(cells, families, config), "n_sweep": n_sweep_table(cells, config),
            "thresholds": threshold_table(cells, config)}
