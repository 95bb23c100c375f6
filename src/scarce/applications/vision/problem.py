r"""Misclassification of a perturbed seed image as a :class:`~scarce.problem.RareEventProblem`.

For a seed image ``x0`` with label ``y``, a perturbation ``x = T(u)`` (:mod:`.noise`) and a
classifier with logits ``l(x)``, the failure event is ``argmax_j l_j(x) != y``. One batched
forward pass of the classifier per evaluation gives everything the estimators need:

* the logits, for the failure flag and the classic performance function, the logit margin
  :math:`m(x) = \max_{j \ne y} l_j(x) - l_y(x)` (``m > 0`` means misclassified);
* the penultimate features, from which the embedding ``z`` is read: the features themselves, or
  a contrastive projection head applied to ``[features, onehot(y)]`` (the seed's label is part of
  the problem, and misclassification is only defined relative to it);
* the SCARCE score ``G(z)`` of a fitted ruler.

With a ruler, the engine's exact terminal event still uses the true failure flag, so the ruler
changes only the variance of the estimate, never its target (documentation,
Concepts: "The exact terminal event").
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from scarce.checks import check_positive_int, is_real
from scarce.errors import ScarceError, show
from scarce.problem import MAX_DIM, RareEventProblem

__all__ = ["ForwardOutputs", "VisionModel", "check_noise", "margin", "modes_kept", "perturbation_problem"]


@contextlib.contextmanager
def modes_kept(*owners: Any) -> Iterator[None]:
    """Put back, after the block, the train or eval flag of every module inside ``owners``.

    The engine queries a model in eval mode (dropout off, batch-norm statistics fixed); a caller
    measuring a network during training would otherwise carry on training it with those switched
    off. Each submodule's own flag is restored, so a mix (a frozen batch-norm inside a model in
    training) stays as it was. Owners without ``modules()`` (plain functions, None) are skipped.
    """
    modules = [m for owner in owners if callable(getattr(owner, "modules", None))
               for m in owner.modules() if isinstance(getattr(m, "training", None), bool)]
    modes = [m.training for m in modules]
    try:
        yield
    finally:
        for module, mode in zip(modules, modes):
            module.training = mode


@dataclass(frozen=True)
class ForwardOutputs:
    """What one batched forward pass returns, as numpy arrays over the ``n`` inputs."""

    logits: np.ndarray  # (n, n_classes) float64 (a label-only model's: its surrogate's)
    embedding: np.ndarray  # (n, k) float64
    features: np.ndarray  # (n, in_dim of the head) float32: head inputs, for training heads
    labels: np.ndarray | None = None  # (n,) the labels of a label-only classifier under test

    def predicted(self) -> np.ndarray:
        """The classifier's decisions: its labels when it gives only those, else the argmax of its logits."""
        return self.labels if self.labels is not None else self.logits.argmax(axis=1)


def margin(logits: np.ndarray, label: int) -> np.ndarray:
    """Logit margin ``max_{j != label} l_j - l_label`` per row (``> 0``: misclassified).

    The other classes' maximum is taken with the label's column masked to ``-inf``: the same
    values as deleting the column, for less work per call.
    """
    logits = np.asarray(logits)
    others = logits.astype(logits.dtype if logits.dtype.kind == "f" else np.float64)  # a copy; floats keep theirs
    own = others[:, label].copy()
    others[:, label] = -np.inf
    return others.max(axis=1) - own


@dataclass
class ForwardTimer:
    """Counts forward passes, the points they saw and the seconds spent in them."""

    calls: int = 0
    points: int = 0
    seconds: float = 0.0
    score_seconds: float = 0.0  # time in the score function (margin or ruler) after the pass

    def reset(self) -> None:
        self.calls, self.points, self.seconds, self.score_seconds = 0, 0, 0.0, 0.0


@dataclass
class VisionModel:
    """A classifier (and an optional projection head) evaluated in batches.

    Parameters
    ----------
    classifier : torch.nn.Module
        Maps a batch of inputs of shape ``(n, *image_shape)`` to logits. A model that provides
        ``logits_and_features(x) -> (logits, features)`` (as
        :class:`~scarce.applications.vision.classifier.SmallCNN` does) is called that way; any
        other module is wrapped in :class:`~scarce.applications.vision.layers.TorchClassifier`
        (its logits; pass a ``TorchClassifier(module, features="layer")`` for a layer's features).
    head : ProjectionHead, optional
        Contrastive head applied to ``[features, onehot(label)]``; without one, the embedding is
        the penultimate features.
    batch_size : int, optional
        Largest batch sent to the classifier at once (a memory and speed bound, not a
        statistical choice). Default: 256 on CPU, 8192 on CUDA. On CPU larger batches are
        slower per image: their activations fall out of cache, and once the first one passes
        glibc's 32 MB mmap threshold (at 640 images for the quick CNN's 16 x 28 x 28 floats per
        image, 320 for the paper CNN's 32) every pass pays page faults (the timings per batch size
        are on the documentation's vision benchmark page).
    n_classes : int or None
        The number of classes; ``None`` reads it from the logits of a probe pass.
    image_shape : tuple of int
        The shape of one input, without the batch axis.
    device : str
        Where the passes run: ``"cpu"`` (the default; bit-reproducible), ``"cuda"``, ``"cuda:1"``,
        or ``"auto"`` (CUDA when available). The classifier and head are moved there; inputs
        and outputs stay numpy on the host. GPU kernels may differ from CPU in the last bits, so
        a seed reproduces its numbers on the same device kind.
    """

    classifier: Any
    head: Any = None
    batch_size: int | None = None
    n_classes: int | None = 10
    image_shape: tuple[int, ...] = (1, 28, 28)
    timer: ForwardTimer = field(default_factory=ForwardTimer)
    device: str = "cpu"
    #: how the classifier is queried (a LabelOnlyModel's is "labels")
    access: ClassVar[str] = "logits"

    def __post_init__(self) -> None:
        import torch

        if not hasattr(self.classifier, "logits_and_features"):
            self.classifier = _as_classifier(self.classifier)
        self.device = resolve_device(self.device)
        if self.batch_size is None:
            self.batch_size = _CPU_BATCH if self.device == "cpu" else _GPU_BATCH
        check_positive_int("batch_size", self.batch_size)
        _refuse_meta(self.classifier)
        if hasattr(self.classifier, "to") and not _already_on(self.classifier, self.device):
            self.classifier.to(self.device)
        if self.head is not None and hasattr(self.head, "network"):
            self.head.network.to(self.device)
        if getattr(self.classifier, "training", False):  # before any pass: batch-norm statistics stay as trained
            self.classifier.eval()
        self._dtype = _input_dtype(torch, self.classifier)
        self._probe(torch)

    def _probe(self, torch: Any) -> None:
        """One pass on two blank inputs: the logits' shape checked, ``n_classes`` read when not given."""
        probe = torch.zeros((2, *self.image_shape), device=self.device, dtype=self._dtype)
        try:
            with torch.inference_mode():
                logits, _ = self.classifier.logits_and_features(probe)
        except ScarceError:
            raise
        except Exception as exc:  # the model's own error, with the input shape it was given
            raise ScarceError(f"the model rejected a batch of shape {tuple(probe.shape)} (inputs of shape "
                              f"{tuple(self.image_shape)} with a batch axis): {type(exc).__name__}: {exc}") from exc
        if getattr(logits, "is_meta", False):  # shapes without values: weights never loaded, or made on "meta"
            raise ScarceError("the model returned logits on the meta device, which hold no values: its weights are "
                              "not loaded (meta device); load them (module.to_empty(device=...), then "
                              "load_state_dict) before passing the model")
        expected = self.n_classes if self.n_classes is not None else "n_classes"
        if logits.ndim != 2 or logits.shape[0] != 2 or (self.n_classes is not None and logits.shape[1] != self.n_classes):
            raise ScarceError(
                f"classifier returns logits of shape {tuple(logits.shape)} for 2 inputs; expected "
                f"(2, {expected}) (n_classes={self.n_classes})"
            )
        if self.n_classes is None:
            self.n_classes = int(logits.shape[1])

    @property
    def n_pixels(self) -> int:
        return math.prod(self.image_shape)

    def head_inputs(self, features: Any, label: int) -> Any:
        """``[features, onehot(label)]`` as a float tensor: what the projection head reads."""
        import torch

        onehot = torch.zeros((features.shape[0], self.n_classes), dtype=features.dtype, device=features.device)
        onehot[:, label] = 1.0
        return torch.cat([features, onehot], dim=1)

    def forward(self, x: np.ndarray, label: int, *, embed: bool = True) -> ForwardOutputs:
        """One batched pass over ``x`` of shape (n, n_pixels) (split only above ``batch_size``).

        With ``embed=False`` only the logits are read (the embedding and head inputs come back
        with zero columns): what the margin score and Monte Carlo need, without the copies.
        """
        import torch

        x = np.asarray(x)
        if x.ndim != 2 or x.shape[1] != self.n_pixels:
            raise ScarceError(f"x must have shape (n, {self.n_pixels}), got {x.shape}")
        if not 0 <= label < self.n_classes:
            raise ScarceError(f"label must be in 0..{self.n_classes - 1}, got {label}")
        start = time.perf_counter()
        if getattr(self.classifier, "training", True):  # eval mode (dropout off, batch-norm statistics fixed)
            self.classifier.eval()
        n, size = x.shape[0], self.batch_size
        with torch.inference_mode():
            if n <= size:  # one pass, the common case
                out = ForwardOutputs(*self._pass(torch, x, label, embed))
            else:
                parts = [self._pass(torch, x[lo:lo + size], label, embed) for lo in range(0, n, size)]
                out = ForwardOutputs(*(np.concatenate(p) for p in zip(*parts)))
        timer = self.timer
        timer.calls += 1
        timer.points += n
        timer.seconds += time.perf_counter() - start
        return out

    def _pass(self, torch: Any, x: np.ndarray, label: int, embed: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """One forward pass of at most ``batch_size`` inputs: logits, embedding and head inputs."""
        n = x.shape[0]
        # a float64 model reads the inputs at full precision; others through float32 (half
        # precision and bfloat16 from there: numpy has no bfloat16)
        host = np.float64 if self._dtype == torch.float64 else np.float32
        # always a copy: a model that edits its input in place must not reach the caller's array
        with np.errstate(over="ignore"):  # values beyond float32 become inf, refused below with their cause
            batch = torch.from_numpy(np.asarray(x).astype(host, order="C").reshape(n, *self.image_shape))
        on_cpu = self.device == "cpu"
        if batch.dtype != self._dtype:
            batch = batch.to(self._dtype)
        _check_finite_inputs(torch, batch, x)
        if not on_cpu:
            batch = batch.to(self.device, non_blocking=True)
        logits, features = self.classifier.logits_and_features(batch)
        if logits.ndim != 2 or logits.shape[1] != self.n_classes:
            raise ScarceError(f"classifier returned logits of shape {tuple(logits.shape)}; expected "
                              f"(n, {self.n_classes}) for a {self.n_classes}-class problem")
        logits_here = (logits.double() if on_cpu else logits.double().cpu()).numpy()  # float64 on the host
        _check_finite_logits(logits_here)
        if not embed:
            if n > len(_NO_COLUMNS):
                return logits_here, np.zeros((n, 0)), np.zeros((n, 0), dtype=np.float32)
            return logits_here, _NO_COLUMNS[:n], _NO_FEATURES[:n]
        inputs = self.head_inputs(features, label)
        embedding = features if self.head is None else self.head.transform_tensor(inputs)
        return logits_here, embedding.double().cpu().numpy(), inputs.cpu().numpy()


ScoreFn = Callable[[ForwardOutputs, int], np.ndarray]


def _check_finite_inputs(torch: Any, batch: Any, x: np.ndarray) -> None:
    """Refuse a batch that is not finite in the model's precision: a NaN from a noise function, or values
    beyond float32's (float16's) range that became inf, would reach the model as values it was never given."""
    if bool(torch.isfinite(batch).all()):
        return
    with np.errstate(invalid="ignore"):
        finite = np.isfinite(x)
        largest = float(np.abs(x[finite]).max()) if finite.any() else float("nan")
    raise ScarceError(f"the perturbed inputs must be finite numbers in the model's precision "
                      f"({str(batch.dtype).replace('torch.', '')}); a batch of {x.shape[0]} held "
                      f"{int(x.size - finite.sum())} NaN or inf value(s) as given and "
                      f"{int((~torch.isfinite(batch)).sum())} once converted (largest finite magnitude {largest:g}): "
                      f"bound the inputs (clip=(low, high)) or lower scale")


def _check_finite_logits(logits: np.ndarray) -> None:
    """Refuse NaN or infinite logits: their argmax would be read as a decision (NaN: class 0), so a
    broken pass would count as a failure or a success whatever the score."""
    finite = np.isfinite(logits)
    if finite.all():
        return
    row, column = (int(i) for i in np.argwhere(~finite)[0])
    raise ScarceError(f"the model's logits must be finite numbers; for a batch of {logits.shape[0]} inputs it returned "
                      f"{int(logits.size - finite.sum())} NaN or inf value(s), the first {logits[row, column]!r} at "
                      f"input {row}, class {column} (an overflow in float16/float32, or inputs outside the range "
                      f"the model takes?)")


def _refuse_meta(classifier: Any) -> None:
    """Refuse a module whose parameters or buffers live on the meta device: shapes without values (a model
    built under ``torch.device("meta")`` whose weights were never loaded) cannot run, nor be moved."""
    module = getattr(classifier, "module", classifier)
    if not (hasattr(module, "named_parameters") and hasattr(module, "named_buffers")):
        return
    meta = next((name for name, t in (*module.named_parameters(), *module.named_buffers()) if t.is_meta), None)
    if meta is not None:
        raise ScarceError(f"the model's weights are not loaded (meta device): {meta!r} holds a shape but no values; "
                          f"load the weights (module.to_empty(device=...), then load_state_dict) before passing it")


def _already_on(classifier: Any, device: str) -> bool:
    """Whether the classifier's module is on the CPU already, every parameter and buffer (then
    ``.to(device)``, a walk over every submodule, is skipped)."""
    module = getattr(classifier, "module", classifier)
    if device != "cpu" or not (hasattr(module, "parameters") and hasattr(module, "buffers")):
        return False
    return all(t.device.type == "cpu" for t in (*module.parameters(), *module.buffers()))


def _input_dtype(torch: Any, classifier: Any) -> Any:
    """The floating dtype of the classifier's first floating parameter (float32 when it has none)."""
    module = getattr(classifier, "module", classifier)
    parameters = module.parameters() if hasattr(module, "parameters") else ()
    return next((p.dtype for p in parameters if p.dtype.is_floating_point), torch.float32)


def _as_classifier(classifier: Any) -> Any:
    """A plain ``torch.nn.Module`` wrapped to give ``logits_and_features``; anything else refused."""
    import torch

    if isinstance(classifier, torch.nn.Module):
        from scarce.applications.vision.layers import TorchClassifier

        return TorchClassifier(classifier)
    hint = ("; it answers with labels only: query it through "
            "scarce.applications.vision.access.LabelOnlyModel (access='labels')"
            if hasattr(classifier, "predict_labels") else "")
    raise ScarceError(f"classifier must be a torch.nn.Module mapping a batch to logits, or provide "
                      f"logits_and_features(x) -> (logits, features); {type(classifier).__name__} is neither{hint}")

_CPU_BATCH = 256
#: zero-column views handed out when only the logits are read (any batch up to 2**20 rows)
_NO_COLUMNS = np.zeros((1 << 20, 0))
_NO_FEATURES = np.zeros((1 << 20, 0), dtype=np.float32)
_GPU_BATCH = 8192


def resolve_device(device: Any) -> str:
    """``device`` checked: ``"cpu"``, ``"cuda"``/``"cuda:<i>"`` (which must be available) or ``"auto"``."""
    import torch

    name = str(device).strip().lower()
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cpu":
        return name
    if name == "cuda" or (name.startswith("cuda:") and name[5:].isdigit()):
        if not torch.cuda.is_available():
            raise ScarceError(f"device={device!r} asks for CUDA, which this torch build or machine lacks "
                              f"(torch {torch.__version__}); use 'cpu' or 'auto'")
        return name
    raise ScarceError(f"device must be 'cpu', 'cuda', 'cuda:<index>' or 'auto', got {device!r}")


#: Scores named by a string: the classifier's logit margin, a label-only model's surrogate's, or
#: none (a constant: for Monte Carlo, which reads only the failure flag).
SCORE_NAMES = ("margin", "surrogate_margin", "none")


def _score_function(score: Any, access: str = "logits", event: Any = None) -> tuple[str, ScoreFn]:
    if isinstance(score, str):
        if score not in SCORE_NAMES:
            raise ScarceError(f"score must be one of {', '.join(SCORE_NAMES)} or a fitted ruler, got {score!r}")
        if score == "margin" and access == "labels":
            raise ScarceError("score='margin' needs the classifier's logits, and this one answers with labels only "
                              "(access='labels'): use a ruler on the surrogate's embedding, or 'surrogate_margin'")
        if score == "surrogate_margin" and access != "labels":
            raise ScarceError("score='surrogate_margin' needs a label-only model with a surrogate "
                              "(LabelOnlyModel); this classifier gives its logits: use 'margin'")
        if score == "none":
            return score, lambda out, label: np.zeros(out.logits.shape[0])
        if event is None:
            return score, lambda out, label: margin(out.logits, label)
        if not event.has_margin:
            raise ScarceError(f"score='margin' is undefined for failure={event.name!r}, a user function of the "
                              f"logits: give the event a score (LogitsEvent(fn, score=...)) or pass "
                              f"score=<fitted ruler>")
        return score, lambda out, label: event.margin(out.logits, label)
    if not hasattr(score, "score_samples"):
        raise ScarceError(f"score must be 'margin' or a fitted ruler with score_samples, got "
                          f"{type(score).__name__}")
    name = getattr(score, "name", type(score).__name__)
    if getattr(score, "reads", "embedding") == "penultimate":  # the head inputs without their one-hot class
        return str(name), lambda out, label: score.score_samples(out.features[:, :-out.logits.shape[1]])
    return str(name), lambda out, label: score.score_samples(out.embedding)


def perturbation_problem(model: VisionModel, image: np.ndarray, label: int, noise: Any, *, score: Any = "margin",
                         record: Callable[[ForwardOutputs, np.ndarray], None] | None = None,
                         name: str = "", event: Any = None) -> RareEventProblem:
    """The problem "the classifier fails on ``noise`` applied to ``image``".

    Parameters
    ----------
    model : VisionModel
    image : array of ``model.n_pixels`` values in the noise's value range (any shape with that many)
    label : int
        The seed's true label; by default failure is ``argmax(logits) != label``.
    noise : GaussianNoise, UniformNoise or CustomNoise
        The latent dimension is the noise's ``latent_dim`` when it has one, else the pixel count.
    score : "margin", "surrogate_margin" or a fitted ruler
        The performance function of the levels: the event's logit margin (classic Subset
        Simulation), a label-only model's surrogate's margin, or ``ruler.score_samples(embedding)``
        (SCARCE); a ruler conditioned on the class scores with the ruler of ``label``.
    record : callable, optional
        Called as ``record(outputs, failed)`` after every forward pass (to harvest labelled
        embeddings for training encoders and rulers).
    event : FailureEvent, optional
        What fails (:mod:`~scarce.applications.vision.events`): misclassification when not
        given, a targeted misclassification, or a user function of the logits.
    """
    dim, how, value_range = check_noise(noise, model.n_pixels)
    x0, label = _check_seed(model, image, label, value_range)
    if event is not None:
        event.check(model.n_classes, label)
        if getattr(event, "needs_logits", False) and getattr(model, "access", "logits") == "labels":
            raise ScarceError(f"failure={event.name!r} reads the logits, and this classifier answers with labels only")
    if hasattr(score, "for_group"):  # a ruler conditioned on the class: the seed's class's ruler
        score = score.for_group(label)
    score_name, score_fn = _score_function(score, getattr(model, "access", "logits"), event)

    def transform(u: np.ndarray) -> np.ndarray:  # a fresh seed each call: a noise that edits it edits a copy
        return noise.apply(x0.copy(), u)

    what = "" if event is None or event.name == "misclassification" else f" {event.name}"
    if (score_name == "none" and record is None and hasattr(model, "query_labels")
            and (event is None or getattr(event, "reads_decisions_only", False))):
        # the names are those the full pass gave (a checkpointed run keys on them): [labels] without an event
        return RareEventProblem(dim=dim, evaluate=_labels_only(model, label, event), transform=transform,
                                name=name or f"{how} label {label}{what} [{'labels' if event is None else score_name}]")
    embed = record is not None or not isinstance(score, str)

    def evaluate(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        out = model.forward(x, label, embed=embed)
        failed = out.predicted() != label if event is None else event.failed(out.logits, label, out.labels)
        if record is not None:
            record(out, failed)
        start = time.perf_counter()
        score = score_fn(out, label)
        model.timer.score_seconds += time.perf_counter() - start
        return score, failed

    return RareEventProblem(dim=dim, evaluate=evaluate, transform=transform,
                            name=name or f"{how} label {label}{what} [{score_name}]")


def _labels_only(model: Any, label: int, event: Any) -> Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """Monte Carlo's ``evaluate`` for a label-only model: the target's labels are all it reads, no surrogate pass."""
    def evaluate_labels(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        decided = model.query_labels(x)
        return np.zeros(x.shape[0]), decided != label if event is None else event.failed(None, label, decided)

    return evaluate_labels


def _noise_label(noise: Any) -> str:
    """``gaussian(0.2)``; a noise of the user's without a name or scale by its class name."""
    kind, scale = getattr(noise, "name", type(noise).__name__), getattr(noise, "scale", math.nan)
    if not is_real(scale):  # NaN is "no scale" (CustomNoise's); anything else must be a number to be shown
        raise ScarceError(f"the noise's scale must be a real number (NaN: none), got {show(scale)} "
                          f"({type(scale).__name__}) on {type(noise).__name__}")
    return kind if math.isnan(scale) else f"{kind}({float(scale):g})"


def check_noise(noise: Any, n_pixels: int) -> tuple[int, str, tuple[float, float]]:
    """The latent width a noise draws, the name it is shown by (``gaussian(0.2)``) and its value range, each
    read from the noise object and checked, so a user's object with odd attributes is refused before any pass.

    The width is ``latent_dim``, or ``n_pixels`` when the noise declares none; it must be a positive integer
    (a fraction would be truncated, a string parsed).
    """
    if not callable(getattr(noise, "apply", None)):
        raise ScarceError(f"noise must have a callable apply(x0, u) -> inputs, got {type(noise).__name__}")
    dim = check_positive_int(f"the latent_dim of the noise {type(noise).__name__}",
                             getattr(noise, "latent_dim", n_pixels), maximum=MAX_DIM)
    return dim, _noise_label(noise), _noise_range(noise)


def _noise_range(noise: Any) -> tuple[float, float]:
    """The ``(low, high)`` range a noise declares for its values (unbounded when it declares none), checked to
    be real numbers with ``low < high``: a seed outside it is refused, so a string or NaN must not pass."""
    low, high = getattr(noise, "low", -math.inf), getattr(noise, "high", math.inf)
    for which, value in (("low", low), ("high", high)):
        if not is_real(value) or math.isnan(value):
            raise ScarceError(f"the noise's {which} must be a real number (the bound of the values it gives; "
                              f"-inf/inf for none), got {show(value)} ({type(value).__name__}) on "
                              f"{type(noise).__name__}")
    if not low < high:
        raise ScarceError(f"the noise's range must have low < high, got low={low!r}, high={high!r} on "
                          f"{type(noise).__name__}")
    return float(low), float(high)


def _check_seed(model: VisionModel, image: np.ndarray, label: int,
                value_range: tuple[float, float]) -> tuple[np.ndarray, int]:
    """The seed image as flat float64 values in the noise's ``value_range`` (:func:`check_noise`), a copy of
    its own, and its label as an int (both checked)."""
    x0 = np.array(image, dtype=np.float64).reshape(-1)  # a copy: the caller's array is never the run's seed
    if x0.size != model.n_pixels:
        raise ScarceError(f"image must have {model.n_pixels} pixels {model.image_shape}, got "
                          f"shape {np.shape(image)}")
    low, high = value_range  # a noise object of the user's without a declared range is not checked against one
    if not np.all(np.isfinite(x0)) or x0.min() < low or x0.max() > high:
        raise ScarceError(f"image must hold finite values in the noise's range [{low:g}, {high:g}], got values in "
                          f"[{np.nanmin(x0):g}, {np.nanmax(x0):g}]; set the range (clip=(low, high), --clip low,high) "
                          f"if the model takes other values")
    if isinstance(label, bool) or not isinstance(label, (int, np.integer)) or not 0 <= label < model.n_classes:
        raise ScarceError(f"label must be an integer in 0..{model.n_classes - 1}, got {label!r}")
    return x0, int(label)
