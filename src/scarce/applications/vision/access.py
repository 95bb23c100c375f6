r"""Label-only (black-box) access: the classifier under test answers with labels, never logits.

Many deployed classifiers expose only their decision. The logit margin
:math:`m(x) = \max_{j \ne y} l_j(x) - l_y(x)` is then out of reach, and with it classic Subset
Simulation and AMLS, whose levels are set on it. SCARCE still runs: its levels come from a
ruler's score :math:`G(z)` on an embedding the user computes with a network they own, and its
exact terminal event, "the label differs from the seed's", needs nothing but labels. Here that
network is a *surrogate*: a classifier of the same family trained by the user on the same data
and on the target's answers (:func:`distillation_set`), with the supervised-contrastive head
fitted on inputs labelled by the *target's* answers.

Why the target's answers: a surrogate trained on the labelled training set alone learns *a*
decision boundary of the task, not the target's, and rare failures live exactly where two
networks' boundaries differ. Papernot et al. (2017) train a substitute from label queries on
inputs chosen near the boundary; here the inputs are the training images under the run's own
perturbation family at a few widened scales (noisy inputs cross the boundary far more often
than clean ones), so the surrogate learns the target's boundary in the region the estimate
explores. These are offline queries, paid once for every seed evaluated later, like the harvest.

Every forward pass queries the target once per input for its label and runs the surrogate on
the same inputs; only the target's queries are counted as model queries (the surrogate is the
user's own). The estimate's target is unchanged: ``P(target label != y)``.

Two ways to fail loudly are kept apart: a target that returns logits where labels were asked
(it would leak the margin) and a logit model used where only labels exist.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from scarce.applications.vision.problem import ForwardOutputs, ForwardTimer, VisionModel, modes_kept
from scarce.errors import ScarceError
from scarce.seeding import SeedLike

__all__ = ["ACCESS_MODES", "LabelFunction", "LabelOnlyModel", "LabelOracle", "distillation_set", "positive_factors"]

#: How the classifier under test may be queried: its logits, or only its labels.
ACCESS_MODES = ("logits", "labels")


class LabelOracle:
    """A classifier seen through its decisions only: ``predict_labels(x) -> (n,)`` integer labels.

    Wraps a module with ``logits_and_features`` (as the application's CNN has) so that no
    logit leaves it: what a deployed black-box classifier gives a user.
    """

    def __init__(self, classifier: Any) -> None:
        if not hasattr(classifier, "logits_and_features"):
            raise ScarceError(f"LabelOracle wraps a classifier with logits_and_features(x); "
                              f"{type(classifier).__name__} has none")
        self._classifier = classifier

    def to(self, device: str) -> LabelOracle:
        if hasattr(self._classifier, "to"):
            self._classifier.to(device)
        return self

    def predict_labels(self, x: Any) -> Any:
        """Labels of a batch of images (a torch tensor of shape (n, 1, 28, 28)).

        The classifier answers in eval mode, and each of its modules gets its own train or eval
        flag back after the call (:func:`~scarce.applications.vision.problem.modes_kept`).
        """
        import torch

        with modes_kept(self._classifier), torch.inference_mode():
            if callable(getattr(self._classifier, "eval", None)):
                self._classifier.eval()
            logits, _ = self._classifier.logits_and_features(x)
        return logits.argmax(dim=1)


class LabelFunction:
    """A plain function as the classifier under test: ``fn(x) -> n`` integer labels for a batch.

    ``x`` is a float32 torch tensor ``(n, *input_shape)`` on the run's device, passed in inference
    mode; the answer may be a tensor, an array or a list, and is checked as every target's answer
    is (:func:`ask_target`, then one label per input).

    A torch model answers in eval mode, as ``model=`` does: one in training mode changes as it
    answers (batch norm's running statistics) and answers at random (dropout). Before each call
    the modules the function reaches are found (:func:`reachable_modules`: through its closure,
    the module-level names its code reads, comprehensions included, attributes of an imported
    module it names, a bound method's object and that object's attributes, a
    ``functools.partial``, a callable object's attributes, and the items of a list, tuple or
    dict it holds), switched to eval mode for the call, and given their own flags back after it
    (:func:`~scarce.applications.vision.problem.modes_kept`). A model held deeper than two such
    steps is not seen: put it in eval mode before the run.
    """

    def __init__(self, fn: Any) -> None:
        if not callable(fn):
            raise ScarceError(f"target must be callable (a batch to labels) or have predict_labels(x); "
                              f"got {type(fn).__name__}")
        self._fn = fn

    def predict_labels(self, x: Any) -> Any:
        """``fn(x)``, with the modules it reaches in eval mode for the call (found anew each call:
        a model the function loads into a global on its first call is seen from the second)."""
        modules = reachable_modules(self._fn)
        if not modules:
            return self._fn(x)
        with modes_kept(*modules):
            for module in modules:
                module.eval()
            return self._fn(x)


#: Items of a list, tuple or dict :func:`reachable_modules` looks into (a large container holds data, not models).
_MAX_ITEMS = 64


def reachable_modules(fn: Any, depth: int = 2) -> list[Any]:
    """The torch modules (anything with ``modules()``, ``eval()`` and a boolean ``training``) that
    ``fn`` reaches within ``depth`` steps (:func:`_referents` says what one step is). Each appears
    once. An object whose attributes raise when read is passed over."""
    seen: dict[int, Any] = {}
    visited: set[int] = set()
    pending = [(fn, 0)]
    while pending:
        obj, step = pending.pop()
        if id(obj) in visited:
            continue
        visited.add(id(obj))
        if _is_module(obj):
            seen.setdefault(id(obj), obj)
        elif step < depth:
            pending.extend((referent, step + 1) for referent in _referents(obj))
    return list(seen.values())


def _is_module(obj: Any) -> bool:
    """Whether ``obj`` is a torch module (scripted ones included), or looks like one when read
    without running its code (no property, no ``__getattr__``: :func:`inspect.getattr_static`),
    since the scan runs before every call."""
    import inspect
    import sys

    torch = sys.modules.get("torch")  # a function over a torch model has imported it
    if torch is not None and isinstance(obj, torch.nn.Module):
        return True
    try:
        return isinstance(inspect.getattr_static(obj, "training", None), bool) \
            and callable(inspect.getattr_static(obj, "modules", None)) \
            and callable(inspect.getattr_static(obj, "eval", None))
    except Exception:  # noqa: BLE001 - an object that refuses even a static read is not one we can switch
        return False


def _referents(obj: Any) -> list[Any]:
    """What ``obj`` answers through, one step down: a partial's function and arguments; a bound
    method's object and function; a function's closure cells, the globals its code names
    (nested code, as comprehensions compile to, included) and, for a global that is a module,
    that module's attributes of those names; the attributes of any other instance; the first
    items of a list, tuple or dict. Modules and classes are not opened wholesale."""
    import functools
    import itertools
    import types

    try:
        if isinstance(obj, functools.partial):
            return [obj.func, *obj.args, *obj.keywords.values()]
        if isinstance(obj, types.MethodType):
            return [obj.__self__, obj.__func__]
        if isinstance(obj, types.FunctionType):
            return _function_referents(obj)
        if isinstance(obj, (list, tuple)):
            return list(obj[:_MAX_ITEMS])
        if isinstance(obj, dict):
            return list(itertools.islice(obj.values(), _MAX_ITEMS))  # not a copy of a large dict
        if isinstance(obj, (types.ModuleType, type)):
            return []
        return list(itertools.islice(vars(obj).values(), _MAX_ITEMS))
    except Exception:  # noqa: BLE001 - an object that refuses to be read holds nothing we can switch
        return []


def _function_referents(fn: Any) -> list[Any]:
    import types

    names, codes = set(), [fn.__code__]
    while codes:
        code = codes.pop()
        names.update(code.co_names)
        codes.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
    found = [cell.cell_contents for cell in (fn.__closure__ or ()) if _filled(cell)]
    for value in (fn.__globals__[name] for name in names if name in fn.__globals__):
        found.append(value)
        if isinstance(value, types.ModuleType):  # mymodule.net: the attributes the code names
            try:
                space = vars(value)
                found.extend(space[name] for name in names if name in space)
            except Exception:  # noqa: BLE001 - one odd module hides nothing else the function reaches
                continue
    return found


def _filled(cell: Any) -> bool:
    try:
        cell.cell_contents
    except ValueError:  # a cell not yet assigned
        return False
    return True


def distillation_set(target: Any, images: np.ndarray, noise: str, scale: float, multiples: tuple[float, ...],
                     n_queries: int, *, seed: SeedLike = 0, batch_size: int = 4096) -> tuple[np.ndarray, np.ndarray]:
    """Perturbed copies of ``images`` and the target's labels for them: a surrogate's training data.

    Copy ``i`` is image ``i mod m`` under ``make_noise(noise, scale * s)``, with ``s`` drawn
    uniformly from ``multiples`` (1 is the run's own perturbation; wider scales reach the
    target's boundary from more images). The copies are spread evenly over the ``m`` images, so
    every class is represented as in the training set.

    Parameters
    ----------
    target : object with ``predict_labels(x)`` (e.g. :class:`LabelOracle`); queried ``n_queries`` times
    images : (m, height, width) training images in the noise's range
    noise, scale : the run's perturbation family and scale (:func:`~scarce.applications.vision.noise.make_noise`)
    multiples : positive factors of ``scale``
    n_queries : number of perturbed copies (>= 1)
    seed : randomness of the images' order, the scales and the noise

    Returns
    -------
    (x, labels) : float32 (n_queries, height, width) and int64 (n_queries,)
    """
    from scarce.checks import check_positive_int
    from scarce.seeding import as_generator

    n_queries = check_positive_int("n_queries", n_queries)
    batch_size = check_positive_int("batch_size", batch_size)
    families = _noise_families(noise, scale, multiples)
    images = np.asarray(images)
    if images.ndim != 3 or len(images) == 0:
        raise ScarceError(f"images must have shape (m, height, width) with m >= 1, got {images.shape}")
    _check_pixels(images, families[0].low, families[0].high)
    flat = images.reshape(len(images), -1).astype(np.float32)
    rng = as_generator(seed)
    source = np.resize(rng.permutation(len(flat)), n_queries)
    which = rng.integers(len(families), size=n_queries)
    x = np.empty((n_queries, flat.shape[1]), dtype=np.float32)
    labels = np.empty(n_queries, dtype=np.int64)
    for lo in range(0, n_queries, batch_size):
        hi = min(lo + batch_size, n_queries)
        u = rng.standard_normal((hi - lo, flat.shape[1]), dtype=np.float32)
        for k, family in enumerate(families):
            rows = np.flatnonzero(which[lo:hi] == k)
            if rows.size == 0:
                continue
            # the noise acts per pixel, so many images perturb at once as one long image
            x[lo + rows] = family.apply(flat[source[lo + rows]].ravel(), u[rows].reshape(1, -1)).reshape(rows.size, -1)
        labels[lo:hi] = _label_batch(target, x[lo:hi].reshape(hi - lo, 1, *images.shape[1:]))
    return x.reshape(n_queries, *images.shape[1:]), labels


def _check_pixels(images: np.ndarray, low: float, high: float) -> None:
    """Refuse images that are not finite numbers in the noise's range, saying what they hold."""
    numeric = images.dtype.kind in "fiub"
    finite = numeric and bool(np.all(np.isfinite(images)))
    if finite and images.min() >= low and images.max() <= high:
        return
    held = (f"values in [{images.min():g}, {images.max():g}]" if finite
            else "non-finite values" if numeric else f"dtype {images.dtype}")
    raise ScarceError(f"images must be finite pixels in the noise's range [{low:g}, {high:g}]; got {held} "
                      "(scale 0..255 images to [0, 1])")


def positive_factors(name: str, values: Any) -> tuple[float, ...]:
    """``values`` as a tuple of floats, or a ScarceError naming ``name`` unless it is a non-empty
    sequence of positive finite numbers (the multiples of a noise scale)."""
    try:
        factors = tuple(float(v) for v in values) if not isinstance(values, (str, bytes)) else ()
    except (TypeError, ValueError):
        factors = ()
    if not factors or not all(np.isfinite(v) and v > 0 for v in factors):
        raise ScarceError(f"{name} must be a non-empty list of positive finite numbers (factors of the noise "
                          f"scale), got {values!r}")
    return factors


def _noise_families(noise: str, scale: float, multiples: Any) -> list[Any]:
    """The run's noise at each multiple of its scale, every bad value named."""
    from scarce.applications.vision.noise import make_noise

    factors = positive_factors("multiples", multiples)
    try:
        return [make_noise(noise, scale * m) for m in factors]
    except (ScarceError, TypeError) as error:
        raise ScarceError(f"noise={noise!r}, scale={scale!r} at multiples {list(factors)}: {error}") from None


def _label_batch(target: Any, x: np.ndarray) -> np.ndarray:
    """The target's labels for a batch of shape (n, 1, height, width), checked to be labels."""
    import torch

    return _checked_labels([ask_target(target, torch.from_numpy(np.ascontiguousarray(x)))], x.shape[0])


def ask_target(target: Any, batch: Any) -> Any:
    """``target.predict_labels(batch)`` in inference mode, its answer detached from autograd.

    Whatever the target raises becomes a :class:`~scarce.errors.ScarceError` that names the
    batch it was given (shape, dtype, device), so a target that expects other inputs says so.
    """
    import torch

    ask = getattr(target, "predict_labels", None)
    if not callable(ask):
        raise ScarceError(f"the target's predict_labels must be callable, got {type(ask).__name__}")
    try:
        with torch.inference_mode():
            answer = ask(batch)
    except ScarceError:
        raise
    except Exception as exc:  # the target's own error, with the batch it could not answer
        raise ScarceError(f"the target raised {type(exc).__name__} on a batch of shape {tuple(batch.shape)}, "
                          f"{str(batch.dtype).replace('torch.', '')} on {batch.device}: {exc}") from exc
    return answer.detach() if hasattr(answer, "detach") else answer


def _as_array(answer: Any, n: int) -> np.ndarray:
    """One answer of the target as a numpy array; one numpy cannot read (a ragged list, a tensor on the meta
    device, an object) is refused as an answer that is not labels, not passed on as numpy's error."""
    try:
        return np.asarray(answer.cpu().numpy() if hasattr(answer, "cpu") else answer)
    except Exception as exc:  # noqa: BLE001 - whatever the target returned, it is not n labels
        shape = getattr(answer, "shape", None)
        described = type(answer).__name__ + (f" of shape {tuple(shape)}" if shape is not None else "")
        raise ScarceError(f"the target must return one integer label per input ({n} inputs); it returned a "
                          f"{described} that cannot be read as an array ({type(exc).__name__}: {exc})") from None


def _checked_labels(answers: list[Any], n: int, n_classes: int | None = None) -> np.ndarray:
    """The target's answers for ``n`` images (tensors, arrays or lists, one per batch) as int64 labels,
    refused unless they are one integer per image (in ``0..n_classes - 1`` when given); a column
    ``(m, 1)`` of integers is read as ``m`` labels."""
    parts = [_as_array(a, n) for a in answers]
    parts = [a.reshape(-1) if a.ndim == 2 and a.shape[1] == 1 and a.dtype.kind in "iu" else a for a in parts]
    if any(a.ndim == 0 for a in parts):
        raise ScarceError(f"the target must return one integer label per input ({n} inputs); it returned a single "
                          f"value ({parts[0].dtype})")
    labels = np.concatenate(parts)
    if labels.shape != (n,) or labels.dtype.kind not in "iu":
        hint = (" (logits or probabilities? a classifier that gives its logits is the model itself: model= in "
                "scarce.vision, access='logits' in the protocol)" if labels.ndim == 2 else "")
        raise ScarceError(f"the target must return one integer label per input, shape ({n},); it returned "
                          f"{labels.dtype} of shape {labels.shape}" + hint)
    if n_classes is not None and labels.size and (labels.min() < 0 or labels.max() >= n_classes):
        bad = labels[(labels < 0) | (labels >= n_classes)][0]
        raise ScarceError(f"the target returned the label {bad}, outside 0..{n_classes - 1}: the surrogate network "
                          f"has {n_classes} classes, and the target's labels must be among them")
    return labels.astype(np.int64, copy=False)


@dataclass
class LabelOnlyModel:
    """The classifier under test, queried for labels, beside the user's surrogate encoder.

    Parameters
    ----------
    target : object with ``predict_labels(x) -> (n,)`` integer labels for a torch batch of
        images (:class:`LabelOracle` makes one from a module).
    encoder : VisionModel
        The surrogate classifier (and its projection head): the embedding the rulers read, the
        features the head is trained on, and the surrogate's own logits (``ForwardOutputs.logits``),
        which only the ``surrogate_margin`` score reads.
    """

    target: Any
    encoder: VisionModel
    access = "labels"

    def __post_init__(self) -> None:
        if isinstance(self.target, VisionModel) or not hasattr(self.target, "predict_labels"):
            hint = (" it returns logits; give it as LabelOracle(classifier), or use access='logits'"
                    if hasattr(self.target, "logits_and_features") or isinstance(self.target, VisionModel) else "")
            raise ScarceError(f"target of label-only access must provide predict_labels(x) -> integer labels; "
                              f"{type(self.target).__name__} does not" + (f";{hint}" if hint else ""))
        if not isinstance(self.encoder, VisionModel):
            raise ScarceError(f"encoder must be a VisionModel (the surrogate network), got {type(self.encoder).__name__}")
        if hasattr(self.target, "to"):
            self.target.to(self.encoder.device)
        self.labels(np.zeros((2, self.n_pixels)))  # a target that answers with logits fails here

    # the interface the vision problem and methods read, delegated to the encoder
    @property
    def n_classes(self) -> int:
        return self.encoder.n_classes

    @property
    def image_shape(self) -> tuple[int, ...]:
        return self.encoder.image_shape

    @property
    def n_pixels(self) -> int:
        return self.encoder.n_pixels

    @property
    def head(self) -> Any:
        return self.encoder.head

    @property
    def device(self) -> str:
        return self.encoder.device

    @property
    def timer(self) -> ForwardTimer:
        return self.encoder.timer

    def labels(self, x: np.ndarray) -> np.ndarray:
        """The target's labels for ``x`` of shape (n, n_pixels), checked to be labels."""
        import torch

        x = np.asarray(x)
        out = []
        for lo in range(0, x.shape[0], self.encoder.batch_size):
            batch = torch.from_numpy(np.ascontiguousarray(x[lo:lo + self.encoder.batch_size], dtype=np.float32))
            out.append(ask_target(self.target, batch.to(self.device).reshape(-1, *self.image_shape)))
        return _checked_labels(out, x.shape[0], self.n_classes)

    def query_labels(self, x: np.ndarray) -> np.ndarray:
        """The target's labels alone (no surrogate pass), timed and counted as forward passes."""
        start = time.perf_counter()
        labels = self.labels(x)
        self.timer.calls += 1
        self.timer.points += len(labels)
        self.timer.seconds += time.perf_counter() - start
        return labels

    def forward(self, x: np.ndarray, label: int, *, embed: bool = True) -> ForwardOutputs:
        """The surrogate's pass (embedding, features, its logits) and the target's labels."""
        out = self.encoder.forward(x, label, embed=embed)
        start = time.perf_counter()
        labels = self.labels(x)
        self.timer.seconds += time.perf_counter() - start
        return replace(out, labels=labels)
