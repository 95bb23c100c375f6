"""The LLM ruler sweep (paper section 6 and appendix ``app:llm-ranking``) as a resumable run.

**Set-up** (:func:`build_setup`, done once, stored as the task ``setup``). The rulers of every
family are fitted on the attack method's records plus the benign records (label: the
``jailbroken`` flag), optionally after the contrastive projection head. Each family's operating
points ``tau_p`` are percentiles ``p`` of its fitted bad-score distribution. Every record of the
corpus is scored once; what the tasks need (per family the benign scores, per group the scores and
labels) is shipped to the workers once.

**Cells.** One task is one cell (ruler variant ``<family>_p<p>``, group, ``eta``, ``N``): the
fleet (:mod:`~scarce.applications.llm.fleet`) of the benign records and the group's records, the
surrogate ``A_tau``, the calibration ``C_tau`` measured on the group's labelled records, the
reference ``p_ref = eta * pi``, and ``n_runs`` Subset Simulation runs of ``N`` samples per level.
Cells of the main grid use ``N = n_samples``; the ``N`` sweep repeats the p-``n_grid_percentile``
variants over ``n_grid`` (a cell at ``N = n_samples`` is the main cell, computed once).

**Transfer** (appendix ``app:gcg-transfer``). The rulers and thresholds fitted on the attack
method are applied to the pooled records of ``transfer_method``; each transfer cell reports the
same cascade runs calibrated twice: with ``C_tau`` inherited from the source method's pooled
records and refitted on the target's.

Per-task seeds are ``SeedSequence([seed, crc32(task key)])``: a function of what the task is, so
one worker and many give the same numbers. Errors ``|r - 1|`` with ``r = p_hat / p_ref`` are
computed from the stored runs by :mod:`scarce.applications.llm.analysis`, never here.
"""

from __future__ import annotations

import hashlib
import math
import time
import warnings
import zlib
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from scarce.applications.llm.corpus import benign_mask, check_corpus, group_mask, group_names
from scarce.applications.llm.fleet import Fleet, check_eta, reference_probability
from scarce.errors import ScarceError, ScarceWarning, unknown_name_error
from scarce.experiments.executors import Executor
from scarce.experiments.run import Run
from scarce.experiments.settings import check_table, load_presets, parse_settings, task_seed
from scarce.experiments.store import ResultStore
from scarce.levels import check_level_sizes
from scarce.rulers.registry import LLM_FAMILIES, THRESHOLD_PERCENTILES

__all__ = ["PRESETS", "LLMSweep", "SweepConfig", "build_setup", "get_preset", "parse_overrides",
           "variant_name"]

ETAS = (1e-4, 1e-3, 1e-2, 5e-2, 1e-1)


def variant_name(family: str, percentile: int) -> str:
    """``"pc1_p75"``: a family at an operating percentile (the registry's variant names)."""
    return f"{family}_p{int(percentile)}"


#: Bounds a sweep must stay within unless ``allow_large`` is set: samples per level (``n_samples``
#: and every ``n_grid`` entry), cascade runs per cell, and their product (the samples one cell
#: draws per level over all its runs, which sets its memory and time).
MAX_SAMPLES = 1_000_000
MAX_RUNS = 10_000
MAX_CELL_SAMPLES = 20_000_000


def eta_text(eta: float) -> str:
    """The shortest scientific notation that reads back as exactly ``eta`` (the key of a cell).

    Two different values never share a text, and a value keeps the text it had with one digit
    (``1e-03``), so run directories stay resumable.

    >>> eta_text(1e-3), eta_text(1.5e-3), eta_text(0.1 + 0.2)
    ('1e-03', '1.5e-03', '3.0000000000000004e-01')
    """
    value = float(eta)
    for digits in range(17):
        text = f"{value:.{digits}e}"
        if float(text) == value:
            return text
    return repr(value)  # not reached: 17 significant digits always round-trip a double


def _check_names(config: SweepConfig) -> None:
    """Text settings: strings (``name`` and ``method`` non-empty), tuples of strings."""
    for key in ("name", "method", "transfer_method", "count_seeds"):
        value = getattr(config, key)
        if not isinstance(value, str) or (key in ("name", "method") and not value.strip()):
            raise ScarceError(f"{key} must be a{' non-empty' if key in ('name', 'method') else ''} "
                              f"string; got {value!r}")
    for key in ("groups", "families", "transfer_variants"):
        values = getattr(config, key)
        if not isinstance(values, tuple) or not all(isinstance(v, str) and v for v in values):
            raise ScarceError(f"{key} must be a tuple of non-empty strings; got {values!r}")
    for key in ("head", "allow_large", "tie_break"):
        if not isinstance(getattr(config, key), bool):
            raise ScarceError(f"{key} must be true or false; got {getattr(config, key)!r}")


def _check_int(key: str, value: object, low: int, high: int | None) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low or \
            (high is not None and value > high):
        allowed = f"an integer >= {low}" if high is None else f"an integer in [{low}, {high:,}]"
        bound = "" if high is None else " (pass allow_large=true to lift the upper bound)"
        raise ScarceError(f"{key} must be {allowed}{bound}; got {value!r}")


def _check_number(key: str, value: object, high: float) -> None:
    """A finite real number in ``(0, high]``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 < value <= high:
        raise ScarceError(f"{key} must lie in (0, {high:g}]; got {value!r}")


def _check_sizes(config: SweepConfig) -> None:
    """Integer settings in range, and within the stated bounds unless ``allow_large``."""
    large = config.allow_large
    if not isinstance(config.n_grid, tuple) or not config.n_grid:
        raise ScarceError(f"n_grid must hold at least one sample size; got {config.n_grid!r}")
    _check_int("n_samples", config.n_samples, 10, None if large else MAX_SAMPLES)
    for n in config.n_grid:
        _check_int("each n_grid entry", n, 10, None if large else MAX_SAMPLES)
    _check_int("n_runs", config.n_runs, 1, None if large else MAX_RUNS)
    _check_int("seed", config.seed, 0, None)
    cell = config.n_runs * max(config.n_samples, *config.n_grid)
    if not large and cell > MAX_CELL_SAMPLES:
        raise ScarceError(f"n_runs x N = {config.n_runs:,} x {max(config.n_samples, *config.n_grid):,} "
                          f"= {cell:,} samples per level per cell exceeds the bound {MAX_CELL_SAMPLES:,}; "
                          "lower n_runs, n_samples or n_grid, or pass allow_large=true to lift the bound")


def _check_unique_values(config: SweepConfig) -> None:
    """No setting lists the same value twice (its cells would share a key and run once)."""
    for key, render in (("families", str), ("percentiles", str), ("etas", eta_text), ("n_grid", str),
                        ("transfer_etas", eta_text), ("transfer_variants", str), ("groups", str)):
        seen: dict[str, Any] = {}
        for value in getattr(config, key):
            text = render(value)
            if text in seen:
                raise ScarceError(f"{key} holds the same value twice: {seen[text]!r} and {value!r} "
                                  f"(both {text}); list each value once")
            seen[text] = value


@dataclass(frozen=True)
class SweepConfig:
    """Everything that defines an LLM sweep (stored with its results as the run's config)."""

    name: str
    method: str = "PAIR"
    groups: tuple[str, ...] = ()  # empty: every group of `method` with at least one jailbreak
    families: tuple[str, ...] = LLM_FAMILIES
    percentiles: tuple[int, ...] = THRESHOLD_PERCENTILES
    etas: tuple[float, ...] = ETAS
    n_samples: int = 20_000
    n_runs: int = 20
    n_grid: tuple[int, ...] = (2000, 5000, 20_000, 50_000)
    n_grid_percentile: int = 75
    level_probability: float = 0.1
    # a cascade run ends once stop_factor * p0 * N samples failed (1: the classic rule)
    stop_factor: float = 0.5
    # seeds count among a level's samples only when drawn independently (scarce.estimators.subset)
    count_seeds: str = "independent"
    # levels broken inside each fleet record (scarce.applications.llm.fleet, Ties); False: the
    # record score alone, as runs made before the tie-break behaved
    tie_break: bool = True
    head: bool = False
    transfer_method: str = "GCG"  # "" for no transfer study
    transfer_variants: tuple[str, ...] = ("pc1_p75", "centroid_p75")
    transfer_etas: tuple[float, ...] = (1e-3, 1e-4)
    ranking_min_eta: float = 1e-3  # the family ranking averages cells with eta >= this
    seed: int = 0
    # lift the bounds MAX_SAMPLES, MAX_RUNS and MAX_CELL_SAMPLES (not part of the stored config)
    allow_large: bool = False

    def __post_init__(self) -> None:
        from scarce.estimators.subset import check_count_seeds
        from scarce.rulers import available_rulers

        _check_names(self)
        for family in self.families:
            if family not in LLM_FAMILIES:
                raise unknown_name_error("ruler family in families", family, LLM_FAMILIES)
        if not self.families or not self.percentiles or not self.etas:
            raise ScarceError("families, percentiles and etas must each hold at least one value; got "
                              f"families={self.families!r}, percentiles={self.percentiles!r}, "
                              f"etas={self.etas!r}")
        for p in (*self.percentiles, self.n_grid_percentile):
            if isinstance(p, bool) or not (isinstance(p, int) and 0 < p < 100):
                raise ScarceError(f"percentiles and n_grid_percentile must be integers in (0, 100); got {p!r}")
        for eta in (*self.etas, *self.transfer_etas):
            if isinstance(eta, bool) or not isinstance(eta, (int, float)):
                raise ScarceError(f"etas and transfer_etas take numbers in (0, 1]; got {eta!r} "
                                  f"({type(eta).__name__})")
            check_eta(eta)
        _check_number("ranking_min_eta", self.ranking_min_eta, 1.0)
        _check_sizes(self)
        _check_number("level_probability", self.level_probability, 0.5)
        for n in {self.n_samples, *self.n_grid}:  # every cell's estimator needs a seed a level
            check_level_sizes(n, self.level_probability)
        _check_number("stop_factor", self.stop_factor, 1.0)
        check_count_seeds(self.count_seeds)
        for variant in self.transfer_variants:
            if variant not in available_rulers("llm"):
                raise unknown_name_error("ruler in transfer_variants", variant, available_rulers("llm"))
        _check_unique_values(self)

    def config(self) -> dict[str, Any]:
        """The settings that define the results (``allow_large`` lifts a bound, so it is left out).

        ``tie_break`` is stored only when True: run directories made before it existed behaved as
        False, so they stay resumable with ``tie_break=False`` and are refused, not mixed, with it on.
        """
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()
                if k != "allow_large" and not (k == "tie_break" and not v)}

    def variants(self) -> list[tuple[str, int]]:
        return [(f, p) for f in self.families for p in self.percentiles]


def _preset_from_table(name: str, table: dict[str, Any]) -> SweepConfig:
    """One table of ``presets.toml`` as a :class:`SweepConfig` (names and types checked first)."""
    from dataclasses import fields

    defaults = {f.name: f.default for f in fields(SweepConfig) if f.name not in ("name", "allow_large")}
    return SweepConfig(name=name, **check_table(table, defaults, f"LLM sweep preset {name!r} (presets.toml)"))


#: The named presets of ``presets.toml`` (paper: the paper's grid; quick: minutes; tiny: tests).
PRESETS: dict[str, SweepConfig] = load_presets("scarce.applications.llm", "presets.toml", _preset_from_table)


def get_preset(name: str, **overrides: Any) -> SweepConfig:
    """A preset by name with fields overridden."""
    if name not in PRESETS:
        raise unknown_name_error("LLM sweep preset", name, PRESETS)
    return replace(PRESETS[name], **overrides) if overrides else PRESETS[name]


def parse_overrides(items: list[str], preset: str = "paper") -> dict[str, Any]:
    """``["n_runs=5", "etas=1e-3,1e-2", "families=pc1,centroid"]`` as :func:`get_preset` overrides.

    Each value is read as the type of the preset's value by the rules of
    :mod:`scarce.experiments.settings`; the ranges are checked by :class:`SweepConfig`.

    Raises
    ------
    ScarceError
        An unknown key, a key set twice, or a value that is not of the setting's type.
    """
    from dataclasses import fields

    base = PRESETS.get(preset, PRESETS["paper"])
    current = {f.name: getattr(base, f.name) for f in fields(SweepConfig) if f.name != "name"}
    return parse_settings(items, current, "sweep setting")


# ----------------------------------------------------------------------------------------- set-up

def corpus_fingerprint(frame: Any) -> str:
    """A sha256 of what a sweep reads from a corpus: ids, methods, targets, labels, embeddings."""
    from scarce.applications.llm.embedding import embedding_matrix

    digest = hashlib.sha256()
    for column in ("record_id", "method", "target_model", "jailbroken"):
        digest.update("\x1f".join(map(str, frame[column].tolist())).encode())
    digest.update(np.ascontiguousarray(embedding_matrix(frame), dtype=np.float32).tobytes())
    return digest.hexdigest()[:16]


def _choose_groups(frame: Any, config: SweepConfig, labels: np.ndarray) -> tuple[list[str], dict[str, str]]:
    methods = sorted(set(frame["method"].astype(str)[~benign_mask(frame)]))
    if config.method not in methods:
        raise unknown_name_error("attack method", config.method, methods)
    if config.groups:
        for group in config.groups:
            mask = group_mask(frame, group)
            if not labels[mask].any():
                raise ScarceError(f"group {group!r} has {int(mask.sum())} adversarial records and no "
                                  "jailbreak, so p_ref = 0 and C_tau is undefined; choose groups with "
                                  "jailbreaks")
        return list(config.groups), {}
    chosen, skipped = [], {}
    for group in group_names(frame, config.method):
        mask = group_mask(frame, group)
        if labels[mask].any():
            chosen.append(group)
        else:
            skipped[group] = f"{int(mask.sum())} records, no jailbreak"
    if not chosen:
        raise ScarceError(f"no group of method {config.method!r} has a jailbreak; nothing to estimate")
    return chosen, skipped


def build_setup(corpus: Any, config: SweepConfig, *, log: Callable[[str], None] | None = None
                ) -> dict[str, Any]:
    """Fit the rulers and score the corpus; returns the (JSON-serialisable) set-up payload.

    Raises
    ------
    ScarceError
        A corpus without embeddings or with NaN in them, an unknown method or group, a group
        without jailbreaks, no benign records while some ``eta < 1``, or a fit set with one class.
    """
    from scarce.applications.llm.embedding import embedding_matrix

    frame = check_corpus(corpus, require_embedding=True)
    Z = embedding_matrix(frame)
    labels = frame["jailbroken"].to_numpy(bool)
    benign = benign_mask(frame)
    if not benign.any() and min(config.etas + config.transfer_etas) < 1.0:
        raise ScarceError("the corpus has no benign records (method 'none'), so a fleet with "
                          "eta < 1 has no benign users; add benign records or use etas=1")
    groups, skipped = _choose_groups(frame, config, labels)
    source = (frame["method"].astype(str) == config.method).to_numpy()
    fit = source | benign
    if labels[fit].all() or not labels[fit].any():
        raise ScarceError(f"the fit set (method {config.method!r} plus benign records) needs both "
                          "jailbroken and non-jailbroken records")
    info: dict[str, Any] = {"records": int(len(frame)), "benign_records": int(benign.sum()),
                            "fit_records": int(fit.sum()), "fit_jailbreaks": int(labels[fit].sum()),
                            "embedding_dim": int(Z.shape[1]), "skipped_groups": skipped,
                            "corpus": corpus_fingerprint(frame)}
    if config.head:
        from scarce.encoders.projection import fit_llm_head

        head = fit_llm_head(Z[fit], labels[fit], seed=config.seed)
        Z = head.transform(Z)
        info["head"] = head.fingerprint()
    scores, thresholds = _fit_rulers(Z, labels, fit, config, info)
    if log is not None:
        log(f"fitted {len(config.families)} ruler families on {int(fit.sum())} records "
            f"({int(labels[fit].sum())} jailbreaks) in {info['timing']['fit_seconds']:.1f} s")
    group_rows = {g: np.flatnonzero(group_mask(frame, g)) for g in groups}
    payload: dict[str, Any] = {
        "kind": "setup", "groups": groups, "timing": info.pop("timing"), "info": info, "thresholds": thresholds,
        "benign": {f: scores[f][benign].tolist() for f in config.families},
        "group_scores": {f: {g: scores[f][rows].tolist() for g, rows in group_rows.items()}
                         for f in config.families},
        "group_labels": {g: labels[rows].tolist() for g, rows in group_rows.items()},
        "source": {"scores": {f: scores[f][source].tolist() for f in config.families},
                   "labels": labels[source].tolist()},
    }
    payload["selector_metrics"] = _selector_metrics(payload)
    if config.transfer_method:
        target = group_mask(frame, config.transfer_method)
        if not labels[target].any():
            raise ScarceError(f"transfer_method {config.transfer_method!r} has no jailbreak; "
                              "choose another or set transfer_method=''")
        payload["transfer"] = {"scores": {f: scores[f][target].tolist() for f in config.families},
                               "labels": labels[target].tolist(), "group": config.transfer_method}
    return payload


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


def _selector_metrics(payload: dict[str, Any]) -> dict[str, Any]:
    """Every selector metric of every (family, group), computed once here so that a report rebuilt
    from the store needs no density estimate (the values are the report's, computed earlier)."""
    from scarce.selection import available_metrics, metric_values

    values = metric_values(selector_scores(payload), list(available_metrics()))
    return {m: {str(f): {str(g): float(v) for g, v in groups.items()} for f, groups in fams.items()}
            for m, fams in values.items()}


def _fit_rulers(Z: np.ndarray, labels: np.ndarray, fit: np.ndarray, config: SweepConfig,
                info: dict[str, Any]) -> tuple[dict[str, np.ndarray], dict[str, dict[str, float]]]:
    """Each family fitted on the fit set: every record's score and the thresholds the grid needs.

    Records each family's separation AUC in ``info``, and the fit's seconds in ``info["timing"]``.
    """
    from scarce.rulers import make_ruler

    start = time.perf_counter()
    scores, thresholds, auc = {}, {}, {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ScarceWarning)
        for family in config.families:
            ruler = make_ruler(family).fit(Z[fit], labels[fit])
            scores[family] = ruler.score_samples(Z)
            needed = {*config.percentiles, config.n_grid_percentile,
                      *(_split_variant(v)[1] for v in config.transfer_variants if _split_variant(v)[0] == family)}
            thresholds[family] = {str(p): float(ruler.threshold(p)) for p in sorted(needed)}
            auc[family] = float(ruler.separation_auc_)
    info["fit_auc"] = auc
    info["timing"] = {"fit_seconds": time.perf_counter() - start}  # moved to the payload's timing
    return scores, thresholds


def _split_variant(variant: str) -> tuple[str, int]:
    family, _, p = variant.rpartition("_p")
    return family, int(p)


# ----------------------------------------------------------------------------------------- tasks

def _cell_key(stage: str, family: str, percentile: int, group: str, eta: float, n: int) -> str:
    """The store key (a file name) of a cell: every part exact, so two cells never share one."""
    safe = group.replace("/", "~")
    key = f"{stage}-{variant_name(family, percentile)}-{safe}-eta{eta_text(eta)}-N{n}"
    if len(key.encode("utf-8")) > 200:
        raise ScarceError(f"group {group!r} makes the cell key {len(key.encode('utf-8'))} bytes long; task "
                          "files are named by their keys and a file name holds at most 255 bytes, so "
                          "use shorter method or target-model names (at most about 150 bytes)")
    return key


def _same_cell(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Two tasks compute the same cell (a main cell is also the N sweep's cell at ``n_samples``)."""
    return {k: v for k, v in a.items() if k != "stage"} == {k: v for k, v in b.items() if k != "stage"}


def _calibration_factor(scores: np.ndarray, labels: np.ndarray, tau: float) -> float:
    from scarce.calibration import precision_recall

    precision, recall = precision_recall(scores, labels.astype(int), tau)
    return float(precision / recall) if recall > 0 else math.nan


def _cascade_runs(fleet: Fleet, tau: float, n: int, runs: int, p0: float, stop_factor: float,
                  count_seeds: str, seed: np.random.SeedSequence, tie_break: bool = False) -> list[dict[str, Any]]:
    from scarce.estimators import SubsetSimulation

    problem = fleet.problem(tau, tie_break=tie_break)
    estimator = SubsetSimulation(n_samples=n, level_probability=p0, max_levels=60, stop_factor=stop_factor,
                                  count_seeds=count_seeds)
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ScarceWarning)
        for child in seed.spawn(runs):
            result = estimator.estimate(problem, seed=child)
            lo, hi = result.ci(0.95)
            out.append({"method": result.method, "p": result.probability, "cov": result.cov, "ci": [lo, hi],
                        "queries": result.n_queries, "seconds": result.wall_time,
                        "levels": len(result.levels), "reached": result.reached_failure,
                        "flags": list(result.flags)})
    return out


def _cell_task(task: dict[str, Any], setup: dict[str, Any]) -> dict[str, Any]:
    """One cell: fleet, surrogate, calibration(s), reference and the cascade runs."""
    family, percentile, group, eta = task["family"], task["percentile"], task["group"], task["eta"]
    tau = setup["thresholds"][family][str(percentile)]
    if task["stage"] == "transfer":
        adv = np.asarray(setup["transfer"]["scores"][family])
        labels = np.asarray(setup["transfer"]["labels"], bool)
        inherited = _calibration_factor(np.asarray(setup["source"]["scores"][family]),
                                        np.asarray(setup["source"]["labels"], bool), tau)
    else:
        adv = np.asarray(setup["group_scores"][family][group])
        labels = np.asarray(setup["group_labels"][group], bool)
        inherited = None
    fleet = Fleet.from_scores(np.asarray(setup["benign"][family]), adv, eta)
    factor = _calibration_factor(adv, labels, tau)
    reference = reference_probability(labels, eta, seed=zlib.crc32(group.encode()))
    benign_mass, harmful_mass = fleet.leakage(tau)
    runs = _cascade_runs(fleet, tau, task["n_samples"], task["n_runs"], task["level_probability"],
                         task["stop_factor"], task["count_seeds"], np.random.SeedSequence(task["seed"]),
                         task.get("tie_break", False))  # a task of a run made before the tie-break
    payload = {
        "kind": "cell", "stage": task["stage"], "family": family, "percentile": percentile,
        "variant": variant_name(family, percentile), "group": group, "eta": eta,
        "n_samples": task["n_samples"], "threshold": tau,
        "surrogate_exact": fleet.surrogate_probability(tau), "factor": factor,
        "benign_mass": benign_mass, "harmful_mass": harmful_mass,
        "p_ref": reference.probability, "p_ref_interval": list(reference.interval),
        "p_ref_rel_half_width": reference.relative_half_width, "jailbreak_rate": reference.rate,
        "runs": runs,
        # timings apart from the results (scarce.experiments.store): the same seed, the same results
        "timing": {"run_seconds": [run.pop("seconds") for run in runs]},
    }
    if inherited is not None:
        payload["factor_inherited"] = inherited
    return payload


def grid_cells(cfg: SweepConfig, groups: list[str]) -> list[tuple[str, str, int, str, float, int]]:
    """Every cell of a sweep's grid as ``(stage, family, percentile, group, eta, N)``: the main grid,
    the N sweep and the transfer."""
    cells = [("main", family, p, group, eta, cfg.n_samples)
             for family, p in cfg.variants() for group in groups for eta in cfg.etas]
    cells += [("nsweep", family, cfg.n_grid_percentile, group, eta, n)
              for family in cfg.families for group in groups for eta in cfg.etas for n in cfg.n_grid]
    if cfg.transfer_method:
        for variant in cfg.transfer_variants:
            family, p = _split_variant(variant)
            if family in cfg.families:
                cells += [("transfer", family, p, cfg.transfer_method, eta, cfg.n_samples) for eta in cfg.transfer_etas]
    return cells


def expected_cell_keys(config: dict[str, Any], groups: list[str]) -> set[str] | None:
    """The store keys a finished sweep of ``config`` (a stored ``config.json``) holds, or None when
    the stored configuration is not one this version can rebuild."""
    from dataclasses import fields

    names = {f.name for f in fields(SweepConfig)}
    try:
        cfg = SweepConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in config.items() if k in names})
    except (ScarceError, TypeError, ValueError):
        return None
    return {_cell_key("cell" if stage != "transfer" else "transfer", *rest) for stage, *rest in grid_cells(cfg, groups)}


@dataclass
class LLMSweep:
    """An LLM sweep over a run directory: set-up, the main grid, the ``N`` sweep and the transfer.

    Parameters
    ----------
    config : SweepConfig
    run_dir : path of the run directory (one file per finished task; a rerun resumes)
    corpus : pandas.DataFrame
        An embedded corpus table; needed only while the set-up is not stored yet.
    progress : optional ``progress(stage, done, total, label)``
    executor : where tasks run (default serial); results do not depend on it.
    """

    config: SweepConfig
    run_dir: Path
    corpus: Any = None
    progress: Callable[[str, int, int, str], None] | None = None
    executor: Executor | None = None
    log: Callable[[str], None] | None = None
    _setup: dict[str, Any] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.run_dir = Path(self.run_dir)
        config = self.config.config()
        if self.corpus is not None:
            config["corpus"] = corpus_fingerprint(check_corpus(self.corpus, require_embedding=True))
        else:  # reopen a run directory without its corpus: its fingerprint is in its config
            config["corpus"] = _stored_corpus(self.run_dir)
        self.store = ResultStore(self.run_dir, config)

    def setup(self) -> dict[str, Any]:
        """The stored set-up, built and stored first if needed."""
        if self._setup is None:
            self._setup = self.store.load("setup")
        if self._setup is None:
            if self.corpus is None:
                raise ScarceError(f"run directory {str(self.run_dir)!r} has no set-up yet; pass the "
                                  "embedded corpus")
            self.store.save("setup", build_setup(self.corpus, self.config, log=self.log),
                            seed=self.config.seed)
            self._setup = self.store.load("setup")
        return self._setup

    def tasks(self) -> dict[str, dict[str, Any]]:
        """Every cell of the grid, keyed by its store key (main, N sweep, transfer)."""
        cfg, setup = self.config, self.setup()
        cells: dict[str, dict[str, Any]] = {}

        def add(stage: str, family: str, p: int, group: str, eta: float, n: int) -> None:
            key = _cell_key("cell" if stage != "transfer" else "transfer", family, p, group, eta, n)
            task = {"stage": stage, "family": family, "percentile": p, "group": group,
                    "eta": float(eta), "n_samples": n, "n_runs": cfg.n_runs,
                    "level_probability": cfg.level_probability, "stop_factor": cfg.stop_factor,
                    "count_seeds": cfg.count_seeds, "tie_break": cfg.tie_break,
                    "seed": [int(x) for x in task_seed(cfg.seed, key).entropy]}
            if key in cells and not _same_cell(cells[key], task):
                first = cells[key]
                raise ScarceError(f"two cells share the key {key!r}: {first['stage']} "
                                  f"{variant_name(first['family'], first['percentile'])} "
                                  f"group {first['group']!r} eta={first['eta']!r} N={first['n_samples']} and "
                                  f"{stage} {variant_name(family, p)} group {group!r} eta={float(eta)!r} N={n}; "
                                  "rename the groups so that they differ after '/' -> '~'")
            cells.setdefault(key, task)

        for cell in grid_cells(cfg, setup["groups"]):
            add(*cell)
        return cells

    def run(self) -> dict[str, Any]:
        """Set-up and every cell; returns the counts of cells, finished and failed ones.

        ``errors`` maps each failed cell's key to its recorded error (type, message, traceback),
        stored under ``errors_dir``; a failed cell is retried by the next run.
        """
        setup = self.setup()
        tasks = self.tasks()

        runner = Run(self.store, self.executor, self.progress)
        payloads = runner.stage("cells", _cell_task, tasks, seeds={key: task["seed"] for key, task in tasks.items()},
                                shared=setup)
        errors = runner.errors(tasks)
        return {"cells": len(tasks), "finished": len(payloads), "failed": len(tasks) - len(payloads),
                "errors": errors, "errors_dir": str(self.store.root / "errors")}


def _stored_corpus(run_dir: Path) -> str:
    """The corpus fingerprint a run directory was made with (to reopen it without the corpus)."""
    corpus = ResultStore.open(run_dir).config.get("corpus")
    if not isinstance(corpus, str):
        raise ScarceError(f"{str(run_dir)!r} is not an LLM sweep run directory (its config has no "
                          "corpus fingerprint); run 'scarce llm sweep' with --corpus first")
    return corpus
