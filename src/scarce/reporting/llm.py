"""Tables, figures and the report of an LLM sweep, built from its result store alone.

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
import os
from pathlib import Path
from typing import Any

import numpy as np

from scarce.reporting.markdown import markdown_table
from scarce.selection.bias import leakage_relative_bias

__all__ = ["cell_rows", "check_output_dir", "family_table", "headline", "n_sweep_table", "selector_scores",
           "selector_table", "threshold_table", "transfer_table", "write_figures", "write_report"]


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
    import warnings

    from scarce.applications.llm.sweep import _cell_key
    from scarce.errors import ScarceError, ScarceWarning

    try:
        stage = "transfer" if payload["stage"] == "transfer" else "cell"
        expected = _cell_key(stage, payload["family"], payload["percentile"], payload["group"],
                             payload["eta"], payload["n_samples"])
    except (KeyError, TypeError, ValueError, ScarceError):
        expected = None
    if expected == key:
        return True
    warnings.warn(f"task file {key!r} holds the cell {expected!r}; it is left out of the report "
                  "(delete it and rerun the sweep to compute that cell under its own key)",
                  ScarceWarning, stacklevel=3)
    return False


def cell_rows(store: Any) -> Any:
    """One row per finished cell (main grid, ``N`` sweep, transfer) as a pandas frame."""
    import pandas as pd

    rows = []
    for key, payload in store.items():
        if payload.get("kind") != "cell" or not _key_matches(key, payload):
            continue
        runs = payload["runs"]
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
            "seconds": float(np.mean([run["seconds"] for run in runs])),
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


def _main(cells: Any, config: dict[str, Any], min_eta: float | None = None) -> Any:
    part = cells[(cells.stage != "transfer") & (cells.n_samples == config["n_samples"])]
    part = part[part.percentile.isin(config["percentiles"])]
    if min_eta is not None:
        part = part[part.eta >= min_eta]
    return part


def selector_scores(setup: dict[str, Any]) -> dict[str, dict[str, tuple[np.ndarray, np.ndarray]]]:
    """``family -> group -> (good, bad)`` score samples from the stored set-up.

    ``good`` is the benign records plus the group's non-jailbroken records, ``bad`` the group's
    jailbreaks (the score distributions the fleet at small ``eta`` actually mixes).
    """
    out: dict[str, dict[str, tuple[np.ndarray, np.ndarray]]] = {}
    for family, by_group in setup["group_scores"].items():
        benign = np.asarray(setup["benign"][family], float)
        out[family] = {}
        for group, scores in by_group.items():
            scores = np.asarray(scores, float)
            labels = np.asarray(setup["group_labels"][group], bool)
            out[family][group] = (np.concatenate([benign, scores[~labels]]), scores[labels])
    return out


def family_table(cells: Any, setup: dict[str, Any], config: dict[str, Any]) -> Any:
    """The ground-truth family ranking with worst-group directional KL and Cohen's d."""
    import pandas as pd

    from scarce.selection import family_ranking, metric_values, selector_values

    part = _main(cells, config, config["ranking_min_eta"])
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
    scores = {f: g for f, g in selector_scores(setup).items() if f in errors}
    rows = []
    for v in selector_robustness(scores, errors, seed=seed):
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
    part = _main(cells, config)
    return (part.groupby(["family", "percentile", "eta"], sort=True)
            .agg(error=("error", "mean"), bias=("bias", "mean"), seconds=("seconds", "mean"),
                 queries=("queries", "mean"), benign_mass=("benign_mass", "mean"),
                 leakage_bias=("leakage_bias", "mean")).reset_index())


def headline(cells: Any, families: Any, config: dict[str, Any]) -> dict[str, Any]:
    """The best family's mean error next to the reference's mean bootstrap relative half-width."""
    if families.empty:
        return {}
    best = families.iloc[0]
    part = _main(cells, config, config["ranking_min_eta"])
    part = part[part.variant == best.best_variant]
    return {"best_variant": best.best_variant, "mean_error": float(best.mean_error),
            "worst_error": float(best.worst_error), "cells": int(best.cells),
            "reference_rel_half_width": float(part.p_ref_rel_half_width.mean()),
            "min_eta": config["ranking_min_eta"]}


# --------------------------------------------------------------------------------------- figures

def _finite(values: Any, cap: float = 1e3) -> np.ndarray:
    out = np.asarray(values, float)
    return np.where(np.isfinite(out), out, cap)


def write_figures(cells: Any, families: Any, config: dict[str, Any], out_dir: str | Path
                  ) -> dict[str, Path]:
    """Accuracy (per ruler, group, eta; N sweep), threshold sweep, KL vs Cohen's d (PNG)."""
    from scarce.reporting.figures import FigureWriter

    writer = FigureWriter(out_dir)
    plt, save, paths = writer.plt, writer.save, writer.paths

    if families.empty:
        return paths
    main = _main(cells, config)
    best = list(families.best_variant)
    fig, axes = plt.subplots(2, 2, figsize=(11, 8))
    ax = axes[0, 0]
    ax.bar(range(len(best)), _finite(families.mean_error), color="#4c72b0")
    ax.set_xticks(range(len(best)), best, rotation=40, ha="right", fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel(f"mean |r - 1| (eta >= {config['ranking_min_eta']:g})")
    ax.set_title("(a) accuracy per ruler (best percentile)", fontsize=10)
    ax = axes[0, 1]
    groups = sorted(main.group.unique())
    width = 0.8 / max(len(best), 1)
    part = main[main.eta >= config["ranking_min_eta"]]
    for i, variant in enumerate(best):
        errors = part[part.variant == variant].groupby("group").error.mean().reindex(groups)
        ax.bar(np.arange(len(groups)) + i * width, _finite(errors), width=width, label=variant)
    ax.set_xticks(np.arange(len(groups)) + 0.4 - width / 2, groups, rotation=20, ha="right", fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("mean |r - 1|")
    ax.set_title("(b) accuracy per group", fontsize=10)
    ax.legend(fontsize=7)
    ax = axes[1, 0]
    for variant in best:
        by_eta = main[main.variant == variant].groupby("eta").error.mean()
        ax.plot(by_eta.index, _finite(by_eta), marker="o", label=variant)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("eta (adversarial fraction)")
    ax.set_ylabel("mean |r - 1|")
    ax.set_title("(c) accuracy per fleet", fontsize=10)
    ax.legend(fontsize=7)
    ax = axes[1, 1]
    sweep = n_sweep_table(cells, config)
    for family, part in sweep.groupby("family"):
        ax.plot(part.n_samples, _finite(part.error), marker="o", label=f"{family}_p{config['n_grid_percentile']}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks(config["n_grid"], [f"{n:,}" for n in config["n_grid"]], fontsize=8)
    ax.minorticks_off()
    ax.set_xlabel("N (samples per level)")
    ax.set_ylabel("mean |r - 1|")
    ax.set_title("(d) N sweep", fontsize=10)
    ax.legend(fontsize=7)
    save(fig, "accuracy")

    table = threshold_table(cells, config)
    etas = sorted(e for e in table.eta.unique() if e <= 1e-3)[-2:] or sorted(table.eta.unique())[:1]
    fig, axes = plt.subplots(1, len(etas), figsize=(5.5 * len(etas), 4), squeeze=False)
    for ax, eta in zip(axes[0], etas, strict=True):
        for family, part in table[table.eta == eta].groupby("family"):
            ax.plot(part.seconds * 1e3, _finite(part.error), marker="o", label=family)
            for _, row in part.iterrows():
                ax.annotate(f"p{int(row.percentile)}", (row.seconds * 1e3, _finite([row.error])[0]), fontsize=7)
        ax.set_yscale("log")
        ax.set_xlabel("mean time per cascade run (ms)")
        ax.set_ylabel("mean |r - 1| over groups")
        ax.set_title(f"threshold percentile sweep, eta = {eta:g}", fontsize=10)
        ax.legend(fontsize=7)
    save(fig, "threshold_sweep")

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, column, label in [(axes[0], "worst_kl", "worst-group KL(p_good || p_bad)"),
                              (axes[1], "cohens_d", "Cohen's d (mean over groups)")]:
        ax.scatter(families[column], _finite(families.mean_error))
        for _, row in families.iterrows():
            ax.annotate(row.family, (row[column], _finite([row.mean_error])[0]), fontsize=8)
        ax.set_yscale("log")
        ax.set_xlabel(label)
        ax.set_ylabel("family mean |r - 1|")
    axes[0].set_title("directional KL against downstream error", fontsize=10)
    axes[1].set_title("Cohen's d against downstream error", fontsize=10)
    save(fig, "selector_kl_vs_cohens_d")
    return paths


# ---------------------------------------------------------------------------------------- report

FAMILY_COLUMNS = [("family", "family", ""), ("best_variant", "best variant", ""),
                  ("mean_error", "mean abs(r-1)", ".3f"), ("noise_floor", "noise floor", ".3f"),
                  ("worst_error", "worst abs(r-1)", ".3f"), ("worst_group", "worst group", ""), ("worst_kl", "worst KL(good ‖ bad)", ".3f"),
                  ("cohens_d", "Cohen's d", ".3f"), ("seconds", "s / run", ".3f")]
SELECTOR_COLUMNS = [("metric", "metric", ""), ("aggregation", "aggr.", ""), ("rho", "rho", ".2f"),
                    ("p", "p", ".3f"), ("p_permutation", "p perm. (one-sided)", ".3f"),
                    ("lofo_min", "LOFO min", ".2f"), ("logo_min", "LOGO min", ".2f"),
                    ("selected", "selects", "")]
TRANSFER_COLUMNS = [("eta", "eta", ".0e"), ("n_samples", "N", ",d"), ("n_runs", "runs", "d"),
                    ("variant", "ruler", ""), ("p_ref", "target", ".3e"),
                    ("inherited_p", "inherited", ".3e"), ("inherited_ratio", "inherited/target", ".2f"),
                    ("refit_p", "refit", ".3e"), ("refit_low", "refit 95% low", ".3e"),
                    ("refit_high", "refit 95% high", ".3e"), ("refit_ratio", "refit/target", ".2f"),
                    ("inherited_error", "inherited abs(r-1)", ".3f"), ("error", "refit abs(r-1)", ".3f"),
                    ("improvement", "inherited err / refit err", ".2f")]


def check_output_dir(path: str | Path, what: str = "output directory", *, create: bool = True) -> Path:
    """Check that ``path`` can be an output directory (and create it); returns it as a Path.

    Called before any work, so that an output path that is a file (or lies under a file, or
    cannot be created) is refused at once rather than after the work is done. With
    ``create=False`` only the checks that need no change on disk are made.

    Raises
    ------
    ScarceError
        An empty path, a path that is (or lies under) an existing non-directory, or a directory
        that cannot be created or written.
    """
    from scarce.errors import ScarceError

    if isinstance(path, str) and not path.strip():
        raise ScarceError(f"{what} must name a directory, got {path!r}")
    path = Path(path)
    for ancestor in (path, *path.parents):
        if ancestor.exists() and not ancestor.is_dir():
            raise ScarceError(f"{what} {str(path)!r}: {str(ancestor)!r} exists and is not a directory; "
                              "choose another path")
        if ancestor.exists():
            if not os.access(ancestor, os.W_OK):
                raise ScarceError(f"{what} {str(path)!r}: {str(ancestor)!r} is not writable")
            break
    if create:
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ScarceError(f"{what} {str(path)!r} cannot be created: {exc.strerror or exc}") from None
    return path


def write_report(store: Any, out_dir: str | Path, *, seed: int = 0) -> tuple[Path, dict[str, Any]]:
    """Figures, ``cells.parquet`` and ``report.md`` from a sweep's store; returns (path, tables)."""
    out_dir = check_output_dir(out_dir, "report directory")
    config = store.config
    setup = store.load("setup")
    if setup is None:
        from scarce.errors import ScarceError

        raise ScarceError(f"{str(store.root)!r} holds no finished set-up; run 'scarce llm sweep' first")
    cells = cell_rows(store)
    if cells.empty:
        from scarce.errors import ScarceError

        raise ScarceError(f"{str(store.root)!r} holds no finished cell yet; run 'scarce llm sweep' first")
    cells.to_parquet(out_dir / "cells.parquet", index=False)
    families = family_table(cells, setup, config)
    selectors = selector_table(families, setup, seed=seed)
    transfer = transfer_table(cells)
    top = headline(cells, families, config)
    figures = write_figures(cells, families, config, out_dir / "figures")
    info = setup["info"]
    parts = ["# SCARCE LLM sweep", "",
             f"* **preset**: {config['name']}; method {config['method']}; groups "
             f"{', '.join(setup['groups'])}",
             f"* **corpus**: {info['records']} records ({info['benign_records']} benign), embedding "
             f"dimension {info['embedding_dim']}, fingerprint {info['corpus']}",
             f"* **fit**: {info['fit_records']} records ({info['fit_jailbreaks']} jailbreaks); "
             f"separation AUC " + ", ".join(f"{f} {a:.3f}" for f, a in info['fit_auc'].items()),
             f"* **cells**: {len(cells)} finished; {config['n_runs']} cascade runs each; "
             f"N = {config['n_samples']:,}; p0 = {config['level_probability']}"]
    if info.get("skipped_groups"):
        parts.append("* **skipped groups** (no jailbreak, so p_ref = 0): " + "; ".join(
            f"{g} ({why})" for g, why in info["skipped_groups"].items()))
    if top:
        parts += ["", "## Headline", "",
                  f"The best family's best variant **{top['best_variant']}** has mean relative error "
                  f"**{top['mean_error']:.1%}** (worst cell {top['worst_error']:.1%}) against `p_ref` over "
                  f"{top['cells']} cells with eta >= {top['min_eta']:g}; the references' own 95% bootstrap "
                  f"intervals have mean relative half-width **{top['reference_rel_half_width']:.1%}** over "
                  "the same cells."]
    parts += ["", "## Ground-truth family ranking", "", *markdown_table(families, FAMILY_COLUMNS), "",
              "Error: mean over groups x eta of the cell's mean `|r - 1|` over its cascade runs, "
              "`r = P_hat(A_tau) * C_tau / p_ref`. Noise floor: `sqrt(2/pi) * sd(r)` over the runs, the "
              "error an unbiased estimate with the observed spread would show; an error close to it is "
              "cascade noise, not ruler bias. `inf`: calibration undefined (no labelled jailbreak "
              "above tau) in some cell."]
    if not selectors.empty:
        parts += ["", "## Selector robustness", "", *markdown_table(selectors, SELECTOR_COLUMNS), "",
                  "rho: Spearman between the oriented selector value and the negative family error "
                  "(> 0: agreement). p: asymptotic; p perm.: exact permutation over the families "
                  "(pre-specified positive direction). LOFO / LOGO: leave-one-family-out and "
                  "leave-one-group-out minima of rho."]
    if not transfer.empty:
        parts += ["", f"## Transfer to {config['transfer_method']}", "",
                  *markdown_table(transfer, TRANSFER_COLUMNS), "",
                  f"Rulers and thresholds fitted on {config['method']}. Inherited: `C_tau` from the "
                  f"{config['method']} records; refit: `C_tau` from the {config['transfer_method']} records. "
                  "The interval is that of the mean over runs (cascade uncertainty only, not the "
                  "calibration's)."]
    sweep = n_sweep_table(cells, config)
    if len(sweep):
        parts += ["", "## N sweep", "", *markdown_table(sweep, [
            ("family", "family", ""), ("n_samples", "N", ",d"), ("error", "mean abs(r-1)", ".3f"),
            ("bias", "abs(mean r - 1)", ".3f"), ("seconds", "s / run", ".3f"), ("queries", "queries", ",.0f")])]
    thresholds = threshold_table(cells, config)
    parts += ["", "## Threshold-percentile sweep", "", *markdown_table(thresholds, [
        ("family", "family", ""), ("percentile", "percentile", "d"), ("eta", "eta", ".0e"),
        ("error", "mean abs(r-1)", ".3f"), ("seconds", "s / run", ".3f"),
        ("benign_mass", "benign leakage P_b", ".3f"), ("leakage_bias", "(1-eta)/eta P_b/P_h", ".3g")])]
    parts += ["", "## Figures", ""]
    parts += [f"![{name}](figures/{path.name})" for name, path in figures.items()]
    path = out_dir / "report.md"
    path.write_text("\n".join(parts) + "\n", encoding="utf-8")
    return path, {"families": families, "selectors": selectors, "transfer": transfer,
                  "headline": top, "cells": cells}


#: Columns of the leave-one-style-out table (one row per fitted -> applied pair and eta).
TRANSFER_MATRIX_COLUMNS = [
    ("fitted", "fitted on", ""), ("applied", "applied to", ""), ("eta", "eta", ".0e"),
    ("jailbreaks", "jailbreaks", "d"), ("best", "best ruler (refit)", ""), ("recall", "recall at tau", ".3f"),
    ("best_error_refit", "refit abs(r-1)", ".3f"), ("best_bias_refit", "refit abs(mean r - 1)", ".3f"),
    ("best_error_inherited", "inherited abs(r-1)", ".3f"), ("exact_refit", "exact P(A)C/p_ref refit", ".3g"),
    ("exact_inherited", "exact P(A)C/p_ref inherited", ".3g"), ("recall_zero", "rulers with recall 0", ""),
]


def write_transfer_report(table: Any, summary: Any, out_dir: str | Path, *, config: dict[str, Any]) -> Path:
    """``transfer.parquet`` (every cell) and ``transfer.md`` (the best ruler per pair); returns the latter."""
    from scarce._atomic import atomic_write_text

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    table.to_parquet(out_dir / "transfer.parquet", index=False)
    parts = ["# Leave-one-style-out transfer", "",
             f"Rulers and thresholds fitted on one attack style plus the benign records, applied to each other "
             f"style (pooled, and per target model with at least {config['min_records']} records and "
             f"{config['min_jailbreaks']} jailbreaks); {config['n_runs']} cascade runs of N = {config['n_samples']:,} "
             "per cell. Inherited: `C_tau` from the fitting style's records; refit: from the applied records. "
             "`exact` is `P(A_tau) C_tau / p_ref` with the exact fleet probability: 1 means the calibration "
             "and the benign leakage cost nothing, and what remains is the cascade's own error.", "",
             *markdown_table(summary, TRANSFER_MATRIX_COLUMNS)]
    path = out_dir / "transfer.md"
    atomic_write_text(path, "\n".join(parts) + "\n")
    return path
