"""What a vision run measured, as tables: one row per task, the Step-1 ruler ranking and the
Step-2 head-to-head (pandas frames that :mod:`scarce.reporting.vision` renders).

Metrics follow the paper (section 5, table "Comparison on 100 held-out MNIST seeds", appendix
"Cross-Device Runtime Calibration"):

* ``MAE`` = mean over seeds of ``|p_hat - p_SMC|``; ``log10 MAE``;
* ``FP`` = seeds with ``p_hat > 0`` and no Monte Carlo failure, ``FN`` = seeds with ``p_hat = 0``
  although Monte Carlo saw failures (on flipped screening seeds, FN are the *missed rare-event
  hits*);
* calibrated runtime = mean queries per seed x ``T_ref`` with the paper's reference rate
  ``T_ref = 6.473e-4`` s/query (so rows are comparable across machines), next to our measured
  wall time;
* RMS relative error of each method next to that of Monte Carlo with as many queries,
  ``sqrt((1 - p) / (q p))``.

The rows carry each method's display name (``name``), so a renderer needs nothing of this package.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from scarce.applications.vision.methods import display_name
from scarce.errors import ScarceError

__all__ = ["T_REF", "head_to_head", "rank_rulers", "report_context", "result_rows"]

T_REF = 289.46 / 447_160  # s/query: the paper's Trad-SS reference rate (6.473e-4)


def result_rows(store: Any) -> Any:
    """One row per finished task, joined with the seed's Monte Carlo ground truth (pandas)."""
    import pandas as pd

    from scarce.results import EstimateResult

    rows = []
    for key, payload, timing in store.timed_items():
        try:
            rows.append(_task_row(payload, timing))
        except ScarceError as exc:  # a checksummed file whose content no task writes: left out, and said
            store.unreadable(key, f"holds no result a task writes ({exc})")
    frame = pd.DataFrame(rows)
    if frame.empty:
        return frame
    # a seed's ground truth: the dense held-out Monte Carlo where it ran, else the candidates'
    truth = frame[frame.stage.isin(["smc", "truth"])].sort_values("stage").drop_duplicates("seed_index", keep="last")
    truth = truth.set_index("seed_index")
    frame["smc_p"] = frame.seed_index.map(truth.p_hat)
    frame["smc_failures"] = frame.seed_index.map(truth.n_failed)
    frame["smc_samples"] = frame.seed_index.map(truth.n_queries)
    frame["abs_err"] = (frame.p_hat - frame.smc_p).abs()
    frame["rel_err"] = np.where(frame.smc_p > 0, frame.abs_err / frame.smc_p.where(frame.smc_p > 0), np.nan)
    # squared relative error of this row, and of Monte Carlo with as many queries: (1 - p) / (q p)
    frame["sq_rel_err"] = frame.rel_err ** 2
    frame["mc_sq_rel_err"] = np.where(frame.smc_p > 0, (1 - frame.smc_p) / (frame.n_queries * frame.smc_p.where(
        frame.smc_p > 0)), np.nan)
    frame["fp"] = (frame.p_hat > 0) & (frame.smc_p == 0)
    frame["fn"] = (frame.p_hat == 0) & (frame.smc_p > 0)
    # does the run's 95% interval hold the Monte Carlo truth (undefined where that saw no failure)
    holds = (frame.ci_low <= frame.smc_p) & (frame.smc_p <= frame.ci_high)
    frame["ci_holds"] = holds.astype(float).where(frame.smc_p > 0)
    return frame


def _summary(frame: Any) -> Any:
    grouped = frame.groupby("method", sort=False)
    out = grouped.agg(
        name=("name", "first"), seeds=("seed_index", "nunique"), mean_p=("p_hat", "mean"),
        mae=("abs_err", "mean"), median_rel_err=("rel_err", "median"), fp=("fp", "sum"),
        fn=("fn", "sum"), queries=("n_queries", "mean"), wall=("wall", "mean"),
        forward=("forward", "mean"), level_jumps=("level_jumps", "sum"),
        not_reached=("reached_failure", lambda s: int((~s.astype(bool)).sum())),
        thin_evidence=("thin_evidence", lambda s: int(s.astype(bool).sum())),
        ci_holds=("ci_holds", "mean"), ci_holds_runs=("ci_holds", "count"), ci_holds_count=("ci_holds", "sum"),
        rows=("p_hat", "size"), mc_samples=("smc_samples", "min"), mc_min_failures=("smc_failures", "min"),
    )
    out["runs"] = out.rows / out.seeds.where(out.seeds > 0)
    out["ci_holds_count"] = out.ci_holds_count.astype(int)  # a count, though summed over a float column
    # root mean squared relative error, and Monte Carlo's at the same queries per run
    out["rms_rel_err"] = np.sqrt(grouped.sq_rel_err.mean())
    out["mc_rms_rel_err"] = np.sqrt(grouped.mc_sq_rel_err.mean())
    out["log10_mae"] = np.log10(out.mae.where(out.mae > 0))
    out["runtime_calibrated"] = out.queries * T_REF
    out["smc_mean_p"] = frame.groupby("method", sort=False).smc_p.mean()
    return out.reset_index()


#: What a vision task's payload holds beside its result, and the type of each.
_TASK_FIELDS = (("stage", str), ("seed_index", int), ("label", int), ("method", str), ("run", int))


def _task_row(payload: Any, timing: dict) -> dict:  # type: ignore[type-arg]
    """One task's row of :func:`result_rows`; a :class:`ScarceError` naming the field a task never writes so."""
    from scarce.results import EstimateResult

    if not isinstance(payload, dict) or "result" not in payload:
        raise ScarceError("no 'result' field")
    for name, kind in _TASK_FIELDS:
        value = payload.get(name, 0 if name == "run" else None)
        if isinstance(value, bool) or not isinstance(value, kind):
            raise ScarceError(f"{name} must be {'an integer' if kind is int else 'a string'}, got {value!r}")
    res = payload["result"]
    result = EstimateResult.from_dict(res)
    low, high = result.ci(0.95)
    return {
        "stage": payload["stage"], "seed_index": payload["seed_index"], "label": payload["label"],
        "method": payload["method"], "name": display_name(payload["method"]), "run": payload.get("run", 0),
        "p_hat": result.probability, "cov": result.cov, "n_queries": result.n_queries,
        "n_failed": result.n_failed, "reached_failure": result.reached_failure,
        "status": result.status, "n_levels": len(result.levels),
        "level_jumps": result.info.get("level_jumps", 0),
        "ci_low": low, "ci_high": high, "thin_evidence": result.thin_evidence,
        "wall": timing.get("wall", res.get("wall_time", np.nan)), "forward": timing.get("forward", np.nan),
    }


def rank_rulers(frame: Any, stage: str = "screen") -> Any:
    """Step-1 ranking: rulers by log10 MAE against Monte Carlo, then by missed hits (FN)."""
    part = frame[(frame.stage == stage) & frame.method.str.startswith("scarce:")]
    if part.empty:
        import pandas as pd

        return pd.DataFrame(columns=["ruler", "log10_mae", "fn", "queries"])
    summary = _summary(part)
    summary["ruler"] = summary.method.str.split(":", n=1).str[1]
    summary = summary.rename(columns={"fn": "missed_hits"})
    summary["fn"] = summary.missed_hits
    return summary.sort_values(["log10_mae", "missed_hits", "queries"], na_position="last").reset_index(drop=True)


def head_to_head(frame: Any, stage: str = "eval") -> Any:
    """The paper's Table 2 layout over the held-out seeds, SCARCE rulers first, sorted by MAE."""
    part = frame[frame.stage == stage]
    summary = _summary(part)
    summary["is_scarce"] = summary.method.str.startswith("scarce:")
    summary = summary.sort_values(["is_scarce", "mae"], ascending=[False, True]).reset_index(drop=True)
    return summary[["name", "method", "seeds", "runs", "mc_samples", "mc_min_failures", "rms_rel_err",
                    "mc_rms_rel_err", "mean_p", "smc_mean_p", "mae", "log10_mae", "median_rel_err",
                    "fp", "fn", "queries", "runtime_calibrated", "wall", "forward", "level_jumps",
                    "not_reached", "thin_evidence", "ci_holds", "ci_holds_runs", "ci_holds_count"]]


def _ruler_fitting(preset: Any) -> str:
    """How the rulers were fitted: pooled or per class, and which fit one model over all classes."""
    from scarce.rulers import make_ruler

    how = "one per class of the seed" if preset.conditioning == "class" else "pooled over all classes"
    grouped = [r for r in getattr(preset, "rulers", ()) if getattr(make_ruler(r), "takes_groups", False)]
    return how + (f"; {', '.join(grouped)}: one softmax over the classes, read for the seed's class" if grouped else "")


def _separation_line(held: dict[str, float], train: dict[str, float]) -> str:
    """Each ruler's held-out AUC, best first, with its training-seed AUC beside it: the gap is how
    much of the separation the ruler learnt from the seeds it was fitted on."""
    return ", ".join(f"{k} {v:.3f}" + (f" ({train[k]:.3f})" if k in train else "")
                     for k, v in sorted(held.items(), key=lambda kv: -kv[1]))


def _access_line(preset: Any, info: dict[str, Any]) -> str:
    """How the classifier under test was queried and, under label-only access, what the surrogate learnt from."""
    if preset.access != "labels":
        return "logits"
    queries = int(info.get("surrogate_queries", 0))
    taught = (f"the training set and {queries:,} perturbed training images labelled by the target, offline"
              if queries else "the training set")
    return (f"labels only: rulers read a surrogate network's embedding; the surrogate learnt from {taught}, "
            f"test accuracy {info['surrogate_test_accuracy']:.4f}; no margin, so no margin Subset Simulation "
            "or AMLS")


def report_context(preset: Any, info: dict[str, Any], outcome: dict[str, Any]) -> dict[str, Any]:
    """What the report states above its tables: the set-up, the rulers' held-out separation, the
    evaluation's basis (seeds x runs, the truth's Monte Carlo budget) and the seeds used."""
    held = info["ruler_auc_heldout"]
    context = {
        "preset": preset.name, "noise": f"{preset.noise} {preset.scale}", "data": info["data"],
        "classifier test accuracy": f"{info['test_accuracy']:.4f}",
        "classifier access": _access_line(preset, info),
        "rulers": _ruler_fitting(preset),
        "rulers on the penultimate features (the surrogate's with labels-only access)": ", ".join(
            r for r in getattr(preset, "rulers", ()) if r in getattr(preset, "feature_rulers", ()))
        or "none (every ruler reads the run's embedding)",
        "ruler separation on held-out seeds (in brackets: on the training seeds; AUC within a class)":
            _separation_line(held, info.get("ruler_auc_train", {})),
    }
    if info.get("ruler_auc_heldout_pooled"):
        pooled = info["ruler_auc_heldout_pooled"]
        context["the same rulers pooled over all classes, held-out AUC within a class"] = ", ".join(
            f"{k} {pooled[k]:.3f}" for k in sorted(held, key=lambda k: -held[k]) if k in pooled)
    truth = preset.truth_samples or preset.methods.smc_samples
    context["Subset Simulation"] = (f"N = {preset.methods.ss_samples:,} samples per level, p0 = "
                                    f"{preset.methods.level_probability}")
    context["held-out evaluation"] = (
        f"{len(outcome['eval_seeds'])} seeds x {preset.n_runs} run(s) of every method; ground truth "
        f"{truth:,} Monte Carlo samples per seed"
        + (f", seeds with at least {preset.min_truth_failures} failures in it" if preset.min_truth_failures else ""))
    context.update({"screening seeds": outcome["screen_seeds"], "held-out seeds": outcome["eval_seeds"],
                    "top rulers": ", ".join(outcome["top_rulers"]), "task errors": len(outcome["errors"])})
    if outcome["errors"]:  # the failed tasks are named, each with the first line of its error
        context["failed tasks"] = "; ".join(
            f"{key} ({record.get('type', 'error')}: {str(record.get('message', '')).splitlines()[0][:120] if record.get('message') else ''})"
            for key, record in sorted(outcome["errors"].items())[:20]) + (
            f"; and {len(outcome['errors']) - 20} more" if len(outcome["errors"]) > 20 else "")
    return context
