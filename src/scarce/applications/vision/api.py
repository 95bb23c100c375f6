r"""Your own PyTorch classifier, one call: the probability that it fails under input noise.

:func:`failure_probability` turns any ``torch.nn.Module`` that maps a batch to logits, and one
input ``x0``, into the rare-event problem

.. math:: P_f = P_{u \sim N(0, I_d)}\big(\text{the model fails on } x = T(x_0, u)\big)

and estimates it with Subset Simulation (Au and Beck 2001) under the exact terminal event: the
failure flag is the model's decision on every evaluated input, so the score of the levels (the
event's logit margin by default, or a fitted ruler on a layer's features) changes only the
variance, never the target. :func:`harvest` collects labelled embeddings from a layer on
training inputs, from which a (conditioned) ruler is fitted in one call
(:meth:`Harvest.fit_ruler`) and passed back as ``score=ruler`` (SCARCE).

Label-only access. A deployed classifier often answers with its decision alone. Given as
``target`` (a function from a torch batch to labels, or an object with ``predict_labels``), it
decides every failure, and every input it labels is a counted query; ``model`` is then the
user's own network, a surrogate that only sets the levels: its logit margin
(``score="surrogate_margin"``) or a ruler on one of its layers. Since the failure flag is the
target's, the surrogate never changes what is estimated; a poor one makes the runs wider and
more often flagged thin evidence (single estimates can then lie far from the truth, which their
intervals say). One trained on the target's answers to perturbed training inputs
(:func:`scarce.applications.vision.access.distillation_set`) follows the target's boundary
where the failures are (Papernot et al. 2017 train such a substitute from label queries).
``label`` then defaults to the target's decision on ``x0``.

>>> import numpy as np, torch
>>> _ = torch.manual_seed(0)
>>> model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(12, 3))
>>> result = failure_probability(model, np.full((3, 2, 2), 0.5), scale=0.3, n_samples=300, device="cpu")
>>> result.reached_failure, result.n_queries > 0
(True, True)
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from scarce.applications.vision.events import make_event
from scarce.applications.vision.noise import CustomNoise, make_noise
from scarce.applications.vision.problem import VisionModel, check_noise, modes_kept, perturbation_problem
from scarce.checks import as_real_array, check_in_interval, check_labels, check_positive_int, check_shape, is_real
from scarce.errors import ScarceError, ScarceWarning, show
from scarce.estimators import SubsetSimulation
from scarce.estimators.base import check_callback
from scarce.problem import MAX_DIM
from scarce.results import EstimateResult
from scarce.seeding import SeedLike, as_generator

__all__ = ["Harvest", "failure_probability", "harvest", "vision_model"]


def _user_module(owner: Any) -> Any:
    """The user's own module inside a :func:`vision_model` wrapper (``owner`` itself otherwise)."""
    inner = getattr(getattr(owner, "classifier", None), "module", None)
    return inner if isinstance(owner, VisionModel) and inner is not None else owner


def _keeps_modes(function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` that leaves ``model``'s and ``target``'s modules in the train or eval mode they came in
    (:func:`~scarce.applications.vision.problem.modes_kept`)."""
    @functools.wraps(function)
    def kept(model: Any, *args: Any, **kwargs: Any) -> Any:
        with modes_kept(*(_user_module(owner) for owner in (model, kwargs.get("target")))):
            return function(model, *args, **kwargs)

    return kept


@_keeps_modes
def vision_model(model: Any, input_shape: Sequence[int], *, features: str | None = None, device: str = "auto",
                 batch_size: int | None = None) -> VisionModel:
    """``model`` ready for the engine: batched inference-mode passes on ``device``, logits checked.

    A :class:`VisionModel` is returned as it is; any other ``torch.nn.Module`` is wrapped so
    that ``features`` (a layer name) gives the embedding. The module is queried in eval mode
    and left in the train or eval mode it came in, here and in the calls that take the wrapper.
    ``input_shape`` is checked before the probe pass allocates a batch of that shape.
    """
    if isinstance(model, VisionModel):
        return model
    from scarce.applications.vision.layers import TorchClassifier

    shape = _input_shape(input_shape)
    classifier = model if hasattr(model, "logits_and_features") and features is None \
        else TorchClassifier(model, features=features)
    return VisionModel(classifier, n_classes=None, image_shape=shape, device=device, batch_size=batch_size)


def _input_shape(input_shape: Any) -> tuple[int, ...]:
    """``input_shape`` as a tuple of positive ints holding at most ``MAX_DIM`` values (the largest latent space a
    problem may have), refused before any batch of that shape is allocated."""
    allowed = "a non-empty sequence of positive integers, one input's shape without the batch axis, e.g. (3, 32, 32)"
    shape = check_shape("input_shape", input_shape, allowed)
    total = math.prod(shape)
    if total > MAX_DIM:
        raise ScarceError(f"input_shape={shape} holds {total:,} values per input, above the "
                          f"{MAX_DIM:,} a perturbation's latent space may have; allowed: {allowed}")
    return shape


def _engine_model(model: Any, input_shape: Sequence[int], features: str | None, device: str,
                  batch_size: int | None, target: Any) -> Any:
    """``model`` for the engine, or, with a label-only ``target``, the target beside ``model`` as its surrogate."""
    engine_model = vision_model(model, input_shape, features=features, device=device, batch_size=batch_size)
    if target is None:
        return engine_model
    from scarce.applications.vision.access import LabelFunction, LabelOnlyModel

    gives_logits = hasattr(target, "logits_and_features") and not hasattr(target, "predict_labels")
    if isinstance(target, VisionModel) or gives_logits:
        raise ScarceError("target= is the classifier under test when it answers with labels only; this one gives its "
                          "logits: pass it as model= and leave target out")
    return LabelOnlyModel(target if hasattr(target, "predict_labels") else LabelFunction(target), engine_model)


def _noise(noise: Any, scale: float, clip: tuple[float, float] | None, shape: tuple[int, ...]) -> Any:
    """The perturbation ``noise`` names, checked against one input of ``shape`` before any model pass."""
    low, high = (-math.inf, math.inf) if clip is None else _pair(clip)
    if isinstance(noise, str):
        check_in_interval("scale", scale, 0.0, math.inf, high_open=True)  # named as the caller passed it
        return make_noise(noise, scale, low=low, high=high)
    if hasattr(noise, "apply"):
        if isinstance(noise, CustomNoise) and noise.shape != tuple(shape):
            raise ScarceError(f"the noise's shape {noise.shape} must equal x0.shape {tuple(shape)}: fn(x0, u) "
                              f"receives x0 in that shape")
        check_noise(noise, math.prod(shape))
        return noise
    if callable(noise):
        return CustomNoise(noise, shape=shape, latent_dim=math.prod(shape), low=low, high=high)
    raise ScarceError(f"noise must be 'gaussian', 'uniform', a noise object with apply(x0, u) or a callable "
                      f"fn(x0, u) -> inputs, got {noise!r}")


def _pair(clip: Any) -> tuple[float, float]:
    """``clip`` as ``(low, high)`` floats: a tuple, list or array of two real numbers (bools, strings and
    unordered sets are refused, as ``GaussianNoise(low=False)`` is)."""
    ordered = isinstance(clip, (Sequence, np.ndarray)) and not isinstance(clip, (str, bytes))
    values = list(clip) if ordered else None
    if values is None or len(values) != 2 or not all(is_real(v) for v in values):
        raise ScarceError(f"clip must be a (low, high) pair of numbers or None, got {show(clip)} "
                          f"({type(clip).__name__}; bools, strings and unordered sets are not a pair of numbers)")
    return float(values[0]), float(values[1])


def _input(x0: Any, name: str = "x0") -> np.ndarray:
    """``x0`` as a float64 array of its own (a copy: nothing the run does reaches the caller's array), refused
    unless it is real numbers (strings, complex values, ragged lists and meta tensors are not read)."""
    allowed = "one input in the shape the model takes (without a batch axis), given as an array"
    x = np.array(as_real_array(x0, name, allowed), dtype=np.float64)
    if x.ndim == 0 or x.size == 0:
        raise ScarceError(f"{name} must be {allowed} of real numbers; got shape {x.shape}")
    return x


def _label(model: VisionModel, x0: np.ndarray, label: Any) -> int:
    """``label`` checked, or, when None, the model's (the target's) decision on ``x0`` (its logits finite)."""
    if label is None:  # the model's own decision on the clean input
        return int(_pass_on_x0(model, x0, 0, False, "its prediction on x0 is the label").predicted()[0])
    label = _one_integer(label)
    if isinstance(label, bool) or not isinstance(label, (int, np.integer)) or not 0 <= label < model.n_classes:
        raise ScarceError(f"label must be a class index in 0..{model.n_classes - 1} of this {model.n_classes}-class "
                          f"model (or None: the prediction on x0, the target's when one is given), got {label!r}")
    return int(label)


def _one_integer(value: Any) -> Any:
    """A one-element integer array or tensor (``np.load`` of a label, ``torch.tensor(7)``) as its Python int;
    anything else as it came, for the caller's check (floats and bools stay refused there)."""
    if isinstance(value, (bool, int, np.integer)) or not hasattr(value, "dtype") or not hasattr(value, "shape"):
        return value
    try:
        if math.prod(value.shape) != 1:
            return value
        item = value.item() if hasattr(value, "item") else value
    except (TypeError, ValueError, RuntimeError):
        return value
    return item if isinstance(item, int) and not isinstance(item, bool) else value


def _pass_on_x0(model: VisionModel, x0: np.ndarray, label: int, embed: bool, why: str) -> Any:
    """One pass on ``x0`` alone; an error the model raises becomes a ScarceError naming the batch it was given
    and ``why`` the pass was made (as the probe pass names its own), not the model's bare exception."""
    try:
        return model.forward(x0.reshape(1, -1), label, embed=embed)
    except ScarceError as exc:
        raise ScarceError(f"the pass on x0 alone ({why}): {exc}") from exc
    except Exception as exc:  # the model's own error, with the input it was given
        raise ScarceError(f"the model raised {type(exc).__name__} on x0 alone, a batch of shape "
                          f"{(1, *model.image_shape)} ({why}): {exc}") from exc


def _ruler_layer(score: Any, features: str | None) -> str | None:
    """The layer a ruler from :meth:`Harvest.fit_ruler` read when ``features`` is left out; an error naming both
    when ``features`` names another (two layers of one width would otherwise pass the width check)."""
    if isinstance(score, str) or not hasattr(score, "fitted_layer_"):
        return features
    layer = score.fitted_layer_
    if features is not None and features != layer:
        raise ScarceError(f"the ruler was fitted on the features of layer {layer!r} (its harvest's features), and "
                          f"features={features!r} names another: leave features out to read the ruler's layer, or "
                          f"fit a ruler on a harvest of that layer")
    return layer


def _check_ruler_width(score: Any, model: VisionModel, x0: np.ndarray, label: int, features: str | None) -> None:
    width = getattr(score, "n_features_in_", None)
    if width is None or isinstance(score, str):
        return
    have = _pass_on_x0(model, x0, label, True, "the width of the features").embedding.shape[1]
    if have != width:
        raise ScarceError(f"the ruler was fitted on {width}-dimensional embeddings, and features={features!r} gives "
                          f"{have}: pass the layer the ruler's training embeddings came from")


@_keeps_modes
def failure_probability(
    model: Any,
    x0: Any,
    label: int | None = None,
    *,
    noise: str | Callable[..., Any] = "gaussian",
    scale: float = 0.2,
    score: Any = "margin",
    failure: Any = "misclassification",
    features: str | None = None,
    clip: tuple[float, float] | None = (0.0, 1.0),
    n_samples: int = 2000,
    estimator: Any = None,
    seed: SeedLike = 0,
    device: str = "auto",
    batch_size: int | None = None,
    callback: Callable[..., None] | None = None,
    target: Any = None,
) -> EstimateResult:
    """Estimate the probability that ``model`` (or a label-only ``target``) fails on ``x0`` under random input noise.

    Returns an :class:`~scarce.results.EstimateResult`; its ``n_queries`` are the estimator's,
    and ``info["setup_queries"]`` counts the few inputs evaluated before (label, shape probe).

    Parameters
    ----------
    model : torch.nn.Module
        Maps a batch ``(n, *x0.shape)`` to logits ``(n, n_classes)`` (or to an object with
        ``.logits``); queried in eval and inference mode, ``batch_size`` at a time; its modes are kept.
    x0 : array_like or torch.Tensor
        One input, in the shape the model takes without the batch axis (e.g. ``(3, 32, 32)``).
    label : int, optional
        The correct class of ``x0``; default: the prediction on it of ``model`` (of ``target`` when given).
    noise, scale : "gaussian", "uniform" or callable; float
        ``clip(x0 + scale u)``, ``clip(x0 + scale (2 Phi(u) - 1))``, or ``fn(x0, u)`` (a batch).
    score : "margin", "surrogate_margin" or fitted ruler
        The levels' score: the event's logit margin (``model``'s, with a ``target``), or
        ``ruler.score_samples`` of the ``features`` embedding (a class-conditioned ruler uses the
        group of ``label``).
    failure : "misclassification", FailureEvent or callable
        ``Targeted(k)``: a decision for class ``k``; ``fn(logits) -> bool (n,)``: a user event
        (its levels need a ruler, or a ``LogitsEvent`` with a score).
    features : str, optional
        The layer (a ``model.named_modules()`` name) whose output a ruler scores; default: logits.
    clip : (low, high) or None
        The range Gaussian and uniform noise clip to, which ``x0`` must lie in (a noise function clips itself).
    n_samples, estimator :
        Samples per level of ``SubsetSimulation(n_samples)``, or any estimator to use instead.
    seed, device, callback :
        Same seed, same result (per device kind); ``"auto"``: CUDA when present; per-level hook.
    target : callable or object with ``predict_labels``, optional
        The classifier under test when it answers with labels only: ``target(x)`` maps a float32
        torch batch ``(n, *x0.shape)`` on ``device`` to ``n`` labels (a model inside it in eval
        mode). Its decision is the failure; ``model`` only sets the levels (module notes).
    """
    estimator = _check_estimator(estimator, n_samples, callback)  # before any model pass
    problem, setup = _problem(model, x0, label, noise=noise, scale=scale, clip=clip, score=score, failure=failure,
                              features=features, device=device, batch_size=batch_size, target=target)
    result = estimator.estimate(problem, seed=seed, **({} if callback is None else {"callback": callback}))
    return replace(result, info={**result.info, "setup_queries": setup})


def _problem(model: Any, x0: Any, label: Any, *, noise: Any, scale: float, clip: Any, score: Any, failure: Any,
             features: str | None, device: str, batch_size: int | None, target: Any) -> tuple[Any, int]:
    """The rare-event problem of :func:`failure_probability`, and the model queries its set-up made."""
    x = _input(x0)
    if target is not None and isinstance(score, str) and score == "margin":
        raise ScarceError("score='margin' reads the logits of the classifier under test, and target= answers with "
                          "labels only: pass score='surrogate_margin' (the margin of model=, your own network), a "
                          "ruler fitted on the features of model=, or score='none' with scarce.MonteCarlo")
    perturbation, event = _noise(noise, scale, clip, x.shape), make_event(failure)  # checked before any pass
    features = _ruler_layer(score, features)
    engine_model = _engine_model(model, x.shape, features, device, batch_size, target)
    chosen = _label(engine_model, x, label)
    problem = perturbation_problem(engine_model, x, chosen, perturbation, score=score, event=event)
    _check_ruler_width(score, engine_model, x, chosen, features)
    # the label pass and the width check, then two inputs: model's shape probe, or a target's answer check
    return problem, engine_model.timer.points + 2


def _check_estimator(estimator: Any, n_samples: int, callback: Any) -> Any:
    """The estimator to run (``SubsetSimulation(n_samples)`` when None), and ``callback`` checked to be callable:
    both refused before any model pass. A class (``scarce.MonteCarlo``) is not an estimator: its instances are."""
    check_callback(callback)
    if estimator is None:
        return SubsetSimulation(n_samples=n_samples)
    if isinstance(estimator, type):
        raise ScarceError(f"estimator must be an estimator instance such as scarce.SubsetSimulation(...) or "
                          f"scarce.MonteCarlo(...); got the class {estimator.__name__} itself (call it: "
                          f"{estimator.__name__}(...))")
    if not callable(getattr(estimator, "estimate", None)):
        raise ScarceError(f"estimator must have estimate(problem, seed=...) (e.g. scarce.SubsetSimulation(...) or "
                          f"scarce.MonteCarlo(...)), got {type(estimator).__name__}")
    return estimator


@dataclass
class Harvest:
    """Labelled embeddings from perturbed training inputs, ready to fit rulers on.

    ``embeddings``: (n, k) float64, the ``features`` layer's output; ``failed``: (n,) bool;
    ``groups``: (n,) int, the label of the input each row was perturbed from (the group of a
    ruler conditioned by class); ``source``: (n,) int, the index of that input.
    """

    embeddings: np.ndarray
    failed: np.ndarray
    groups: np.ndarray
    source: np.ndarray
    features: str | None = None
    per_input: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        """``failed`` checked to be one 0/1 flag per row of ``embeddings`` (NaN or 2 is no flag), kept as bool."""
        rows = len(self.embeddings) if hasattr(self.embeddings, "__len__") else -1
        self.failed = check_labels(self.failed, n_samples=rows, name="failed", require_both=False)

    @property
    def n_failures(self) -> int:
        return int(self.failed.sum())

    def fit_ruler(self, name: str, by: str | None = None, **params: Any) -> Any:
        """A ruler from the registry fitted on these rows; ``by="class"`` fits one per label group.

        A ruler that takes the groups itself (``"boundary"``: one softmax over the labels) is always
        fitted with them; ``by`` does not apply to it. The ruler remembers the layer it read
        (``fitted_layer_``, this harvest's ``features``), which :func:`failure_probability` then uses
        when ``features`` is left out, and refuses another.
        """
        ruler = self._fitted(name, by, **params)
        ruler.fitted_layer_ = self.features
        return ruler

    def _fitted(self, name: str, by: str | None, **params: Any) -> Any:
        from scarce.rulers import make_ruler

        if self.n_failures == 0 or self.n_failures == len(self.failed):
            raise ScarceError(f"the harvest has {self.n_failures} failure(s) in {len(self.failed)} rows: a ruler needs "
                              f"both failures and normal rows (raise scale, n_samples or the number of inputs)")
        y = self.failed.astype(np.int64)
        if getattr(make_ruler(name), "takes_groups", False):
            return make_ruler(name, **params).fit(self.embeddings, y, groups=self.groups)
        if by is None:
            return make_ruler(name, **params).fit(self.embeddings, y)
        return make_ruler(name, by=by, **params).fit(self.embeddings, y, groups=self.groups)


def _harvest_one(engine_model: Any, x: np.ndarray, label: int, perturbation: Any, event: Any,
                 estimator: SubsetSimulation, seed: np.random.SeedSequence) -> tuple[np.ndarray, np.ndarray, Any]:
    embeddings: list[np.ndarray] = []
    flags: list[np.ndarray] = []

    def record(out: Any, failed: np.ndarray) -> None:
        embeddings.append(out.embedding)
        flags.append(np.asarray(failed, dtype=bool))

    # a label-only target has no margin: the levels then follow the surrogate's
    score = "surrogate_margin" if getattr(engine_model, "access", "logits") == "labels" else "margin"
    problem = perturbation_problem(engine_model, x, label, perturbation, score=score, event=event, record=record)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ScarceWarning)
        result = estimator.estimate(problem, seed=seed)
    return np.concatenate(embeddings), np.concatenate(flags), result


@_keeps_modes
def harvest(
    model: Any,
    inputs: Any,
    labels: Any = None,
    *,
    noise: str | Callable[..., Any] = "gaussian",
    scale: float = 0.2,
    features: str | None = None,
    clip: tuple[float, float] | None = (0.0, 1.0),
    failure: Any = "misclassification",
    n_samples: int = 500,
    max_queries: int = 20_000,
    max_normal_per_input: int = 2000,
    seed: SeedLike = 0,
    device: str = "auto",
    batch_size: int | None = None,
    target: Any = None,
) -> Harvest:
    """Labelled embeddings of ``model``'s ``features`` layer on perturbed ``inputs``.

    Margin Subset Simulation runs on each input and every input the model evaluates is kept
    (failures all, normal ones up to ``max_normal_per_input``): its upper levels sit near and
    inside the failure region, so failures, rare under the noise, are plentiful in the record
    (the offline stage of SCARCE, paper Algorithm 1). Fit rulers on the result with
    :meth:`Harvest.fit_ruler` and use them on *other* inputs with ``score=ruler``.

    ``inputs`` has shape ``(m, *input_shape)``; ``labels`` their correct classes (default: the
    model's predictions). Each input runs on its own child of ``SeedSequence(seed)``.

    With a label-only ``target`` (as in :func:`failure_probability`), the rows are flagged by the
    target's decisions, the embeddings come from ``model`` (your surrogate), whose margin sets the
    harvest's levels, and ``labels`` default to the target's predictions.
    """
    xs = _input(inputs, "inputs")
    if xs.ndim < 2:
        raise ScarceError(f"inputs must be a batch (m, *input_shape), got shape {xs.shape}")
    check_positive_int("max_normal_per_input", max_normal_per_input)
    perturbation = _noise(noise, scale, clip, xs.shape[1:])
    event, root = make_event(failure), _root_seed(seed)
    engine_model = _engine_model(model, xs.shape[1:], features, device, batch_size, target)
    given = [None] * len(xs) if labels is None else _labels(labels, len(xs))
    estimator = SubsetSimulation(n_samples=n_samples, max_queries=max_queries)
    rng = np.random.default_rng(root.spawn(1)[0])
    parts: list[tuple[np.ndarray, np.ndarray, int, int]] = []
    per_input = []
    for i, (x, child) in enumerate(zip(xs, root.spawn(len(xs)))):
        label = _label(engine_model, x, given[i])
        z, failed, result = _harvest_one(engine_model, x, label, perturbation, event, estimator, child)
        normal = np.flatnonzero(~failed)
        if normal.size > max_normal_per_input:
            normal = rng.choice(normal, size=max_normal_per_input, replace=False)
        keep = np.sort(np.concatenate([np.flatnonzero(failed), normal]))
        parts.append((z[keep], failed[keep], label, i))
        per_input.append({"index": i, "label": label, "probability": result.probability,
                          "n_failures": int(failed.sum()), "n_queries": result.n_queries})
    return Harvest(np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]),
                   np.concatenate([np.full(len(p[1]), p[2]) for p in parts]),
                   np.concatenate([np.full(len(p[1]), p[3]) for p in parts]), features, per_input)


def _labels(labels: Any, n: int) -> list[int]:
    """One integer class per input (bools, fractions and strings refused)."""
    values = np.asarray(labels).reshape(-1)
    if values.dtype == bool or not np.issubdtype(values.dtype, np.number) or len(values) != n \
            or not np.all(np.isfinite(values)) or not np.all(values == np.round(values)):
        raise ScarceError(f"labels must give one integer class per input ({n} inputs), got {len(values)} values of "
                          f"dtype {values.dtype}")
    return [int(v) for v in values]


def _root_seed(seed: SeedLike) -> np.random.SeedSequence:
    """The root of the per-input seeds: a SeedSequence as is, an int's own, one draw of a Generator."""
    generator = as_generator(seed)  # checks the seed (a negative int, a float, ... are refused)
    if isinstance(seed, np.random.SeedSequence):  # a copy: spawning advances the caller's sequence
        return np.random.SeedSequence(seed.entropy, spawn_key=seed.spawn_key, pool_size=seed.pool_size,
                                      n_children_spawned=seed.n_children_spawned)
    if isinstance(seed, (int, np.integer)):
        return np.random.SeedSequence(int(seed))
    return np.random.SeedSequence(int(generator.integers(2**63)))
