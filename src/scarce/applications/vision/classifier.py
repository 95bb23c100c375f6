"""A small CNN for MNIST: seeded, deterministic training with an on-disk cache, and helpers.

The classifier maps images ``x`` in [0, 1]^(28x28) to 10 logits; its penultimate layer
(``features``) is the embedding ``z = f_theta(x)`` that rulers score. Training is reproducible
bit for bit on CPU for a given torch build, thread count and processor: parameters are
initialised and batches shuffled from an explicit ``torch.Generator`` seeded by
``ClassifierConfig.seed``, and deterministic algorithms are switched on for the duration of
training only. No global RNG is seeded or consumed. Another processor may run other vector
kernels, whose last bits differ, and hundreds of SGD steps carry them apart into other weights
(as accurate, but failing on other inputs): the trained weights' digest
(:func:`weights_digest`) and the processor are recorded, so that a figure measured against one
model is not checked against another.

A trained model is cached as ``<fingerprint>.safetensors`` (weights, architecture and config in its
metadata) plus ``<fingerprint>.json`` (config, training accuracy, timings, versions); the
fingerprint is the sha256 of the config and of the training images and labels, so a changed data
set or config trains a new model. Models are loaded with safetensors only, never with pickle.

>>> import numpy as np
>>> model = SmallCNN(seed=0)
>>> predict_logits(model, np.zeros((3, 28, 28), dtype=np.float32)).shape
(3, 10)
>>> predict_features(model, np.zeros((3, 784), dtype=np.float32)).shape
(3, 128)
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Union

import numpy as np
import torch
import torch.nn.functional as F
from numpy.typing import ArrayLike, NDArray
from torch import nn

from scarce._atomic import atomic_write_bytes
from scarce.checks import check_positive_int, warn_user
from scarce.errors import ScarceError, ScarceWarning

__all__ = [
    "ClassifierConfig",
    "SmallCNN",
    "accuracy",
    "check_classifier",
    "load_classifier",
    "predict_features",
    "predict_logits",
    "processor_name",
    "save_classifier",
    "train_classifier",
    "weights_digest",
]

PathLike = Union[str, "os.PathLike[str]"]
N_CLASSES = 10
IMAGE_SHAPE = (28, 28)
#: Pixel mean and standard deviation of the MNIST training set; inputs are standardised inside
#: the model so callers pass images in [0, 1].
PIXEL_MEAN, PIXEL_STD = 0.1307, 0.3081
#: Bumped when the cache layout or the training procedure changes (part of the fingerprint).
CACHE_FORMAT = 1
#: torch intra-op threads of training, whatever the machine has: one, so the same config and data
#: give the same weights everywhere (a run with more threads sums in another order).
TRAINING_THREADS = 1


# --------------------------------------------------------------------------- configuration

@dataclass(frozen=True)
class ClassifierConfig:
    """Architecture and training settings of :func:`train_classifier`.

    Training runs ``max(epochs, ceil(min_steps / steps_per_epoch))`` epochs of AdamW with a
    cosine learning-rate decay to 0, so a small data set (the embedded 3,500 digits) still gets
    enough optimiser steps while full MNIST runs ``epochs`` passes.

    Attributes
    ----------
    conv1_channels, conv2_channels : int
        Channels of the two 3x3 convolutions (each followed by ReLU and 2x2 max pooling).
    hidden : int
        Width of the penultimate layer (the embedding returned by ``SmallCNN.features``).
    epochs : int
        Minimum number of passes over the training data.
    min_steps : int
        Minimum number of optimiser steps (more epochs are run on small data sets).
    batch_size : int
    learning_rate : float
        Peak AdamW learning rate.
    weight_decay : float
        AdamW decoupled weight decay (>= 0).
    seed : int
        Seeds parameter initialisation and batch shuffling (non-negative).
    """

    conv1_channels: int = 32
    conv2_channels: int = 64
    hidden: int = 128
    epochs: int = 2
    min_steps: int = 600
    batch_size: int = 64
    learning_rate: float = 1e-3
    weight_decay: float = 1e-4
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("conv1_channels", "conv2_channels", "hidden", "epochs", "batch_size"):
            check_positive_int(name, getattr(self, name))
        check_positive_int("min_steps", self.min_steps, minimum=0)
        check_positive_int("seed", self.seed, minimum=0)
        for name, low_open in (("learning_rate", True), ("weight_decay", False)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or value < 0 or (low_open and value == 0):
                allowed = "a finite number > 0" if low_open else "a finite number >= 0"
                raise ScarceError(f"{name} must be {allowed}, got {value!r}")

    def to_dict(self) -> dict[str, Any]:
        """The settings as a JSON-friendly dict (``from_dict`` inverts it)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ClassifierConfig:
        """A config from :meth:`to_dict` output; unknown keys raise."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ScarceError(f"unknown ClassifierConfig field(s) {unknown}; allowed: {sorted(known)}")
        return cls(**data)

    def fingerprint(self, images: ArrayLike, labels: ArrayLike) -> str:
        """sha256 (hex) of this config and of the training data: the cache key of a model.

        Parameters
        ----------
        images : array_like of shape (n, 28, 28), (n, 784) or (n, 1, 28, 28), in [0, 1]
        labels : array_like of shape (n,), integers in 0..9
        """
        x = _as_image_tensor(images, "images")
        y = _as_label_tensor(labels, "labels", x.shape[0], N_CLASSES)
        return _fingerprint(self, x, y)


def _data_fingerprint(x: torch.Tensor, y: torch.Tensor) -> str:
    digest = hashlib.sha256()
    digest.update(json.dumps([list(x.shape), list(y.shape)]).encode())
    digest.update(x.contiguous().numpy())   # buffer protocol: no copy of the images
    digest.update(y.contiguous().numpy())
    return digest.hexdigest()


def _fingerprint(config: ClassifierConfig, x: torch.Tensor, y: torch.Tensor) -> str:
    payload = {"format": CACHE_FORMAT, "model": "SmallCNN", "config": config.to_dict(),
               "data": _data_fingerprint(x, y)}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


# --------------------------------------------------------------------------- model

class SmallCNN(nn.Module):
    """Two 3x3 conv layers (ReLU, 2x2 max pool) and two linear layers, for 1x28x28 digits.

    ``x -> standardise -> conv(1->c1) -> pool -> conv(c1->c2) -> pool -> linear(49*c2 -> hidden)
    -> ReLU = features(x) -> linear(hidden -> n_classes) = forward(x)`` (logits).

    Parameters
    ----------
    conv1_channels, conv2_channels, hidden : int
        Layer widths (defaults 32, 64, 128: about 420k parameters).
    n_classes : int
    seed : int
        Seeds the parameter initialisation (PyTorch's default uniform schemes, drawn from a
        private ``torch.Generator``; the global RNG is untouched).

    Attributes
    ----------
    n_classes : int
    fingerprint : str or None
        Cache key when trained by :func:`train_classifier`.
    from_cache : bool
        True when :func:`train_classifier` loaded the model from its cache instead of training.
    training_info : dict
        What training recorded (config, training accuracy, seconds, versions, the weights'
        digest and the processor); empty if untrained.
    """

    def __init__(self, conv1_channels: int = 32, conv2_channels: int = 64, hidden: int = 128,
                 n_classes: int = N_CLASSES, *, seed: int = 0) -> None:
        super().__init__()
        c1 = check_positive_int("conv1_channels", conv1_channels)
        c2 = check_positive_int("conv2_channels", conv2_channels)
        h = check_positive_int("hidden", hidden)
        self.n_classes = check_positive_int("n_classes", n_classes, minimum=2)
        seed = check_positive_int("seed", seed, minimum=0)
        skip = nn.utils.skip_init   # allocate without the default (global-RNG) initialisation
        self.conv1 = skip(nn.Conv2d, 1, c1, kernel_size=3, padding=1)
        self.conv2 = skip(nn.Conv2d, c1, c2, kernel_size=3, padding=1)
        self.fc1 = skip(nn.Linear, c2 * 7 * 7, h)
        self.fc2 = skip(nn.Linear, h, self.n_classes)
        self.fingerprint: str | None = None
        self.from_cache = False
        self.training_info: dict[str, Any] = {}
        self.reset_parameters(seed)

    def architecture(self) -> dict[str, int]:
        """The constructor's width arguments (enough to rebuild the module)."""
        return {"conv1_channels": self.conv1.out_channels, "conv2_channels": self.conv2.out_channels,
                "hidden": self.fc1.out_features, "n_classes": self.n_classes}

    @torch.no_grad()
    def reset_parameters(self, seed: int = 0) -> None:
        """Re-initialise every layer as PyTorch does by default, from a generator seeded by ``seed``."""
        generator = torch.Generator().manual_seed(int(seed))
        for layer in (self.conv1, self.conv2, self.fc1, self.fc2):
            nn.init.kaiming_uniform_(layer.weight, a=math.sqrt(5), generator=generator)
            fan_in = layer.weight[0].numel()
            bound = 1.0 / math.sqrt(fan_in)
            nn.init.uniform_(layer.bias, -bound, bound, generator=generator)

    @staticmethod
    def _as_batch(x: torch.Tensor) -> torch.Tensor:
        if x.ndim == 2 and x.shape[1] == 784:
            return x.reshape(-1, 1, *IMAGE_SHAPE)
        if x.ndim == 3 and tuple(x.shape[1:]) == IMAGE_SHAPE:
            return x.unsqueeze(1)
        if x.ndim == 4 and tuple(x.shape[1:]) == (1, *IMAGE_SHAPE):
            return x
        raise ScarceError(f"x must have shape (n, 784), (n, 28, 28) or (n, 1, 28, 28); "
                          f"got {tuple(x.shape)}")

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """Penultimate-layer embedding of shape (n, hidden) (after ReLU) for images in [0, 1]."""
        x = self._as_batch(x).to(self.fc1.weight.dtype)
        x = (x - PIXEL_MEAN) / PIXEL_STD
        pool = _max_pool_2x2 if not torch.is_grad_enabled() else _max_pool_grad
        x = pool(F.relu(self.conv1(x)))
        x = pool(F.relu(self.conv2(x)))
        return F.relu(self.fc1(x.flatten(1)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits of shape (n, n_classes) for images of shape (n, 784), (n, 28, 28) or (n, 1, 28, 28)."""
        return self.fc2(self.features(x))

    def logits_and_features(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Logits and penultimate features from one forward pass (what the estimators read)."""
        features = self.features(x)
        return self.fc2(features), features


def _max_pool_grad(x: torch.Tensor) -> torch.Tensor:
    return F.max_pool2d(x, 2)


def _max_pool_2x2(x: torch.Tensor) -> torch.Tensor:
    """2x2 max pooling, stride 2, as two elementwise maxima of strided views (no gradient path).

    The same values as ``F.max_pool2d(x, 2)`` bit for bit (a maximum is exact), and faster on CPU
    for the batches Subset Simulation sends, where torch's pooling kernel dominated the forward
    pass. Odd sizes fall back to ``F.max_pool2d``.
    """
    if x.shape[-1] % 2 or x.shape[-2] % 2:
        return F.max_pool2d(x, 2)
    rows = torch.maximum(x[..., 0::2, :], x[..., 1::2, :])
    return torch.maximum(rows[..., 0::2], rows[..., 1::2])


# --------------------------------------------------------------------------- input checks

def _as_image_tensor(images: ArrayLike, name: str) -> torch.Tensor:
    """A float32 CPU tensor of shape (n, 1, 28, 28) with finite values in [0, 1], or raise."""
    if isinstance(images, torch.Tensor):
        t = images.detach().to("cpu")
        if not (t.is_floating_point() or t.dtype in (torch.uint8, torch.int64, torch.int32)):
            raise ScarceError(f"{name} must be a real-valued image array; got a {t.dtype} tensor")
        t = t.to(torch.float32)
    else:
        try:
            a = np.asarray(images)
            if a.dtype.kind not in "fiu":
                raise TypeError(f"dtype {a.dtype}")
            a = a.astype(np.float32, copy=not a.flags.writeable)
        except (TypeError, ValueError) as exc:
            raise ScarceError(f"{name} must be a numeric array of images; got {type(images).__name__} "
                              f"({exc})") from None
        t = torch.from_numpy(np.ascontiguousarray(a))
    shape = tuple(t.shape)
    if t.ndim == 2 and shape[1] == 784:
        t = t.reshape(-1, 1, *IMAGE_SHAPE)
    elif t.ndim == 3 and shape[1:] == IMAGE_SHAPE:
        t = t.unsqueeze(1)
    elif not (t.ndim == 4 and shape[1:] == (1, *IMAGE_SHAPE)):
        raise ScarceError(f"{name} must have shape (n, 28, 28), (n, 784) or (n, 1, 28, 28); got {shape}")
    if t.shape[0] == 0:
        raise ScarceError(f"{name} must hold at least one image; got shape {shape}")
    finite = torch.isfinite(t)
    if not bool(finite.all()):
        first = int(torch.nonzero(~finite.reshape(t.shape[0], -1).all(dim=1))[0])
        n_bad = int((~finite).sum())
        raise ScarceError(f"{name} contains {n_bad} non-finite pixel(s) (NaN or inf), the first in "
                          f"image {first}; pixels must be finite and in [0, 1]")
    low, high = float(t.min()), float(t.max())
    if low < 0.0 or high > 1.0:
        hint = " (divide 0..255 pixels by 255)" if high > 1.0 else ""
        raise ScarceError(f"{name} has pixels in [{low:g}, {high:g}]; allowed: [0, 1]{hint}")
    return t.contiguous()


def _as_label_tensor(labels: ArrayLike, name: str, n: int, n_classes: int) -> torch.Tensor:
    """An int64 tensor of shape (n,) with values in 0..n_classes-1, or raise."""
    a = labels.detach().cpu().numpy() if isinstance(labels, torch.Tensor) else np.asarray(labels)
    if a.ndim != 1 or a.shape[0] != n:
        raise ScarceError(f"{name} must be a 1-D array of {n} labels (one per image); got shape {a.shape}")
    if a.dtype.kind not in "iu":
        raise ScarceError(f"{name} must hold integer class labels 0..{n_classes - 1}; got dtype {a.dtype}")
    bad = (a < 0) | (a >= n_classes)
    if bad.any():
        values = np.unique(a[bad])[:5].tolist()
        raise ScarceError(f"{name} holds label value(s) {values}; allowed: 0..{n_classes - 1}")
    return torch.from_numpy(a.astype(np.int64))


def _check_batch_size(batch_size: object) -> int:
    return check_positive_int("batch_size", batch_size)


def _check_model(model: object) -> nn.Module:
    if not isinstance(model, nn.Module):
        raise ScarceError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    return model


def _device_of(model: nn.Module) -> torch.device:
    parameter = next(model.parameters(), None)
    return parameter.device if parameter is not None else torch.device("cpu")


@contextlib.contextmanager
def _evaluating(model: nn.Module) -> Iterator[None]:
    """Eval mode and inference mode for the block; the model's previous mode is restored."""
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            yield
    finally:
        model.train(was_training)


# --------------------------------------------------------------------------- prediction

def _batched(model: nn.Module, x: torch.Tensor, batch_size: int, fn: Any) -> NDArray[np.float32]:
    device = _device_of(model)
    outputs = []
    with _evaluating(model):
        for start in range(0, x.shape[0], batch_size):
            batch = x[start:start + batch_size]
            out = fn(batch.to(device))
            if not isinstance(out, torch.Tensor) or out.ndim != 2 or out.shape[0] != batch.shape[0]:
                got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
                raise ScarceError(f"model must return a tensor of shape (n, n_outputs) for n images; "
                                  f"got {got} for {batch.shape[0]} images")
            outputs.append(out.float().cpu())
    return torch.cat(outputs).numpy()


def predict_logits(model: nn.Module, images: ArrayLike, batch_size: int = 1024) -> NDArray[np.float32]:
    """Logits of ``model`` for ``images``, in batches under ``torch.inference_mode()``.

    Parameters
    ----------
    model : torch.nn.Module
        Called on float32 batches of shape (b, 1, 28, 28) in [0, 1], on the model's device; its
        train/eval mode is restored afterwards.
    images : array_like of shape (n, 28, 28), (n, 784) or (n, 1, 28, 28), in [0, 1]
    batch_size : int

    Returns
    -------
    ndarray of shape (n, n_classes), float32
    """
    model = _check_model(model)
    batch_size = _check_batch_size(batch_size)
    x = _as_image_tensor(images, "images")
    return _batched(model, x, batch_size, model)


def predict_features(model: nn.Module, images: ArrayLike, batch_size: int = 1024) -> NDArray[np.float32]:
    """Penultimate-layer embeddings ``model.features(images)``, shape (n, hidden), float32.

    Same batching and input rules as :func:`predict_logits`; ``model`` needs a ``features`` method.
    """
    model = _check_model(model)
    if not callable(getattr(model, "features", None)):
        raise ScarceError(f"model must have a features(x) method returning embeddings; "
                          f"{type(model).__name__} has none")
    batch_size = _check_batch_size(batch_size)
    x = _as_image_tensor(images, "images")
    return _batched(model, x, batch_size, model.features)


def accuracy(model: nn.Module, images: ArrayLike, labels: ArrayLike, batch_size: int = 1024) -> float:
    """Fraction of ``images`` whose arg-max logit equals the label (ties go to the lowest class).

    Parameters
    ----------
    model : torch.nn.Module
    images : array_like of shape (n, 28, 28), (n, 784) or (n, 1, 28, 28), in [0, 1]
    labels : array_like of shape (n,), integers in 0..n_classes-1
    batch_size : int
    """
    model = _check_model(model)
    batch_size = _check_batch_size(batch_size)
    x = _as_image_tensor(images, "images")
    n_classes = int(getattr(model, "n_classes", N_CLASSES))
    y = _as_label_tensor(labels, "labels", x.shape[0], n_classes).numpy()
    logits = _batched(model, x, batch_size, model)
    return float(np.mean(np.argmax(logits, axis=1) == y))


def check_classifier(model: nn.Module, n_classes: int = N_CLASSES) -> None:
    """Run ``model`` on a dummy batch and raise unless it returns finite (n, n_classes) logits.

    The dummy batch is ``zeros(2, 1, 28, 28)`` on the model's device, under inference mode.

    Raises
    ------
    ScarceError
        ``model`` is not a module, raises on the batch, or returns the wrong type, shape or
        non-finite values.
    """
    model = _check_model(model)
    n_classes = check_positive_int("n_classes", n_classes, minimum=2)
    dummy = torch.zeros(2, 1, *IMAGE_SHAPE, device=_device_of(model))
    try:
        with _evaluating(model):
            out = model(dummy)
    except Exception as exc:
        raise ScarceError(f"model raised {type(exc).__name__} ({exc}) on a dummy batch of shape "
                          "(2, 1, 28, 28); a classifier must take float32 images of shape (n, 1, 28, 28) "
                          "in [0, 1]") from exc
    if not isinstance(out, torch.Tensor):
        raise ScarceError(f"model must return a tensor of logits of shape (n, {n_classes}); "
                          f"got {type(out).__name__}")
    if tuple(out.shape) != (2, n_classes):
        raise ScarceError(f"model must return logits of shape (n, {n_classes}) (n_classes={n_classes}); "
                          f"got shape {tuple(out.shape)} for a dummy batch of 2 images")
    if not out.is_floating_point() or not bool(torch.isfinite(out).all()):
        raise ScarceError(f"model must return finite floating-point logits; got dtype {out.dtype} "
                          "with non-finite or non-float values on a dummy batch of zeros")


# --------------------------------------------------------------------------- save / load

def save_classifier(model: SmallCNN, path: PathLike, info: Mapping[str, Any] | None = None) -> Path:
    """Write ``model`` to ``path`` (safetensors, atomically) and ``info`` to ``path`` with ``.json``.

    The safetensors metadata holds the architecture (and ``info``), so :func:`load_classifier`
    needs only this file.
    """
    from safetensors.torch import save

    if not isinstance(model, SmallCNN):
        raise ScarceError(f"model must be a SmallCNN, got {type(model).__name__}")
    path = Path(os.fspath(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    info = dict(info or {})
    tensors = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
    metadata = {"format": str(CACHE_FORMAT), "model": "SmallCNN",
                "architecture": json.dumps(model.architecture()), "info": json.dumps(info, sort_keys=True)}
    atomic_write_bytes(path, save(tensors, metadata=metadata))
    atomic_write_bytes(path.with_suffix(".json"), (json.dumps(info, indent=2, sort_keys=True) + "\n").encode())
    return path


def load_classifier(path: PathLike) -> SmallCNN:
    """Load a :class:`SmallCNN` written by :func:`save_classifier` (safetensors only; no pickle).

    Raises
    ------
    ScarceError
        The file is not a SmallCNN safetensors file or its tensors do not fit the architecture.
    """
    from safetensors import safe_open

    path = Path(os.fspath(path))
    try:
        with safe_open(str(path), framework="pt") as handle:
            metadata = handle.metadata() or {}
            tensors = {key: handle.get_tensor(key) for key in handle.keys()}
    except FileNotFoundError:
        raise
    except Exception as exc:
        raise ScarceError(f"{path} is not a readable safetensors file ({exc})") from exc
    if metadata.get("model") != "SmallCNN" or "architecture" not in metadata:
        raise ScarceError(f"{path} is not a SmallCNN checkpoint (metadata {sorted(metadata)}); "
                          "save models with save_classifier")
    model = SmallCNN(**json.loads(metadata["architecture"]))
    try:
        model.load_state_dict(tensors, strict=True)
    except RuntimeError as exc:
        raise ScarceError(f"{path}: tensors do not fit the architecture {metadata['architecture']} ({exc})") \
            from exc
    model.training_info = json.loads(metadata.get("info", "{}"))
    model.fingerprint = model.training_info.get("fingerprint")
    return model.eval()


# --------------------------------------------------------------------------- training

@contextlib.contextmanager
def _deterministic_algorithms() -> Iterator[None]:
    """``torch.use_deterministic_algorithms(True)`` inside the block; the previous setting after."""
    enabled = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(enabled, warn_only=warn_only)


def _fit(x: torch.Tensor, y: torch.Tensor, config: ClassifierConfig,
         progress: bool) -> tuple[SmallCNN, dict[str, Any]]:
    """Train a fresh SmallCNN on CPU; return it (eval mode) and what training recorded."""
    start = time.perf_counter()
    n = x.shape[0]
    generator = torch.Generator().manual_seed(config.seed)
    model = SmallCNN(config.conv1_channels, config.conv2_channels, config.hidden,
                     seed=int(torch.randint(2**62, (1,), generator=generator)))
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.learning_rate,
                                  weight_decay=config.weight_decay)
    steps_per_epoch = math.ceil(n / config.batch_size)
    n_epochs = max(config.epochs, math.ceil(config.min_steps / steps_per_epoch))
    total, step = n_epochs * steps_per_epoch, 0
    loss_sum = correct = 0.0
    with _deterministic_algorithms():
        model.train()
        for epoch in range(n_epochs):
            order = torch.randperm(n, generator=generator)
            loss_sum = correct = 0.0
            for begin in range(0, n, config.batch_size):
                index = order[begin:begin + config.batch_size]
                xb, yb = x[index], y[index]
                for group in optimizer.param_groups:   # cosine decay from the peak rate to 0
                    group["lr"] = 0.5 * config.learning_rate * (1.0 + math.cos(math.pi * step / total))
                logits = model(xb)
                loss = F.cross_entropy(logits, yb)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                step += 1
                loss_sum += float(loss.detach()) * len(index)
                correct += float((logits.detach().argmax(1) == yb).sum())
            if progress:
                print(f"epoch {epoch + 1}/{n_epochs}: loss {loss_sum / n:.4f}, "
                      f"running accuracy {correct / n:.4f}", file=sys.stderr, flush=True)
    seconds = time.perf_counter() - start
    model.eval()
    info = {
        "format": CACHE_FORMAT,
        "config": config.to_dict(),
        "architecture": model.architecture(),
        "n_train": n,
        "epochs_run": n_epochs,
        "steps": total,
        "final_epoch_loss": loss_sum / n,
        "train_accuracy": accuracy(model, x, y.numpy()),
        "train_seconds": round(seconds, 3),
        "torch_version": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "processor": processor_name(),
        "weights_sha256": weights_digest(model),
    }
    return model, info


def weights_digest(model: nn.Module) -> str:
    """sha256 of a module's parameters and buffers: their names, dtypes, shapes and bytes, in name order.

    Two models with the same digest answer every input alike on one device; the cache key
    (:meth:`ClassifierConfig.fingerprint`) names what a model was trained from, this names what
    training produced.
    """
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        array = tensor.detach().cpu().contiguous().numpy()
        digest.update(f"{name}:{array.dtype.str}:{array.shape}".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


def processor_name() -> str:
    """The processor's model name (Linux's ``/proc/cpuinfo``), else what :mod:`platform` knows."""
    import platform

    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def _fit_on_training_threads(x: torch.Tensor, y: torch.Tensor, config: ClassifierConfig,
                             progress: bool) -> tuple[SmallCNN, dict[str, Any]]:
    """:func:`_fit` on :data:`TRAINING_THREADS` intra-op threads (the same weights on any core count)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(TRAINING_THREADS)
    try:
        return _fit(x, y, config, progress)
    finally:
        torch.set_num_threads(threads)


def train_classifier(images: ArrayLike, labels: ArrayLike, config: ClassifierConfig = ClassifierConfig(), *,
                     cache_dir: PathLike | None = None, progress: bool = False) -> SmallCNN:
    """Train a :class:`SmallCNN` (or load it from ``cache_dir``), deterministically on CPU.

    Parameters
    ----------
    images : array_like of shape (n, 28, 28), (n, 784) or (n, 1, 28, 28)
        Finite pixels in [0, 1].
    labels : array_like of shape (n,)
        Integer classes 0..9.
    config : ClassifierConfig
    cache_dir : str or path-like, optional
        If given, a model with the same fingerprint (config + data, see
        :meth:`ClassifierConfig.fingerprint`) is loaded from ``<cache_dir>/<fingerprint>.safetensors``
        without training (``model.from_cache`` is True); otherwise the trained model is written
        there, with ``<fingerprint>.json`` beside it (atomically). An unreadable cache entry is
        retrained with a warning.
    progress : bool
        Print one line per epoch to stderr.

    Returns
    -------
    SmallCNN
        In eval mode, with ``fingerprint``, ``from_cache`` and ``training_info`` set.

    Notes
    -----
    The same config and data give bit-identical weights on the same torch build and processor,
    whatever the core count: training runs on :data:`TRAINING_THREADS` intra-op threads (two
    threads sum in another order, and every later number diverges from those last bits).
    Another processor may take other vector kernels and train other weights; ``training_info``
    records the processor and the weights' digest (:func:`weights_digest`).
    Deterministic algorithms are enabled only while training, so this is not thread-safe with
    other code toggling ``torch.use_deterministic_algorithms``.
    """
    if not isinstance(config, ClassifierConfig):
        raise ScarceError(f"config must be a ClassifierConfig, got {type(config).__name__}")
    x = _as_image_tensor(images, "images")
    y = _as_label_tensor(labels, "labels", x.shape[0], N_CLASSES)
    fingerprint = _fingerprint(config, x, y)
    path = None
    if cache_dir is not None:
        path = Path(os.fspath(cache_dir)).expanduser() / f"{fingerprint}.safetensors"
        if path.is_file():
            try:
                model = load_classifier(path)
                if model.training_info.get("config") != config.to_dict():
                    raise ScarceError("its recorded config differs from the requested one")
            except (ScarceError, OSError, ValueError) as exc:
                warn_user(f"ignoring the cached classifier {path} ({exc}); training a new one", ScarceWarning)
            else:
                model.fingerprint, model.from_cache = fingerprint, True
                return model
    model, info = _fit_on_training_threads(x, y, config, bool(progress))
    info["fingerprint"] = fingerprint
    model.fingerprint, model.training_info = fingerprint, info
    if path is not None:
        save_classifier(model, path, info)
    return model
