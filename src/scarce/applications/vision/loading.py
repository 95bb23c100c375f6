"""A user's model and input from files: a factory named by import path, safetensors weights, an image.

What ``scarce vision estimate`` loads, each step with an error that names the file and what is
allowed:

* the model is built by calling a factory named ``"package.module:function"`` with no
  arguments (the current directory is importable, as with ``python -m``); a classifier that
  answers with labels only is named the same way (``--labels-from``) and used as it is;
* its weights load from a safetensors file only: a safetensors file holds tensors and a JSON
  header, never code, where a pickle (``.pt``, ``.pth``, ``.bin``, ``.ckpt``) can run any code
  when it is read. Keys and shapes must match the model exactly (strict loading);
* the input is a ``.npy`` array (read without pickle) or an image (PNG, JPEG, ...), which becomes
  channels-first values in [0, 1]: ``(1, H, W)`` for greyscale, ``(3, H, W)`` for colour.
"""

from __future__ import annotations

import difflib
import importlib
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

from scarce.errors import ScarceError

__all__ = ["build_model", "import_object", "label_target", "load_weights", "read_input"]

_PICKLE_SUFFIXES = (".pt", ".pth", ".bin", ".ckpt", ".pkl", ".pickle")
_IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp")


def import_object(option: str, path: str, name: str, what: str) -> Any:
    """The object named ``"module.path:attribute"``, every failure an error naming ``option``.

    ``name`` and ``what`` describe what the path must name (``"factory"``, "a function that
    returns the torch.nn.Module"), for the error of a malformed one.
    """
    module_name, sep, attribute = str(path).partition(":")
    if not sep or not module_name or not attribute:
        raise ScarceError(f"{option} must be 'package.module:{name}' ({what}), got {path!r}")
    if module_name.startswith("."):
        raise ScarceError(f"{option} {path!r}: the module must be an absolute import path (package.module), "
                          f"not a relative one")
    if os.getcwd() not in sys.path:  # like `python -m`: the working directory's packages are importable
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise ScarceError(f"{option} {path!r}: cannot import {module_name!r} ({exc}); run from the directory that "
                          f"holds it or add that directory to PYTHONPATH") from exc
    except Exception as exc:  # a syntax error or an error at import time in the user's module
        raise ScarceError(f"{option} {path!r}: importing {module_name!r} raised {type(exc).__name__}: {exc}") from exc
    found: Any = module
    reached = module_name
    for part in attribute.split("."):
        try:
            found = getattr(found, part)
        except AttributeError:
            close = difflib.get_close_matches(part, [n for n in dir(found) if not n.startswith("_")], n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise ScarceError(f"{option} {path!r}: {reached} has no attribute {part!r}{hint}") from None
        except Exception as exc:  # a property or module __getattr__ of the user's that raises
            raise ScarceError(f"{option} {path!r}: reading {part!r} of {reached} raised "
                              f"{type(exc).__name__}: {exc}") from exc
        reached = f"{reached}.{part}"
    return found


def build_model(factory: str) -> Any:
    """Call the factory ``"module.path:function"`` and check that it returns a ``torch.nn.Module``."""
    import torch

    target = import_object("--model", factory, "factory", "a function that returns the torch.nn.Module")
    try:
        model = target() if callable(target) and not isinstance(target, torch.nn.Module) else target
    except Exception as exc:  # the factory's own error, named
        raise ScarceError(f"--model {factory!r}: calling the factory with no arguments raised "
                          f"{type(exc).__name__}: {exc}") from exc
    if not isinstance(model, torch.nn.Module):
        raise ScarceError(f"--model {factory!r} must name a torch.nn.Module or a function returning one; it gave "
                          f"{type(model).__name__}")
    return model


def label_target(path: str) -> Any:
    """The classifier under test named ``"module.path:name"`` when it answers with labels only.

    The name is used as it is, not called: a function from a torch batch to labels, or an object
    with ``predict_labels`` (set-up such as loading a model or opening a connection belongs to
    the module's import).
    """
    target = import_object("--labels-from", path, "function", "a function from a batch to labels, or an object "
                           "with predict_labels")
    if not (hasattr(target, "predict_labels") or callable(target)):
        raise ScarceError(f"--labels-from {path!r} must name a function from a batch to labels or an object with "
                          f"predict_labels; it names an object of type {type(target).__name__}")
    return target


def load_weights(model: Any, path: str | os.PathLike[str]) -> Any:
    """Load a safetensors state dict into ``model`` strictly; mismatching keys and shapes are named."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    file = Path(path)
    if file.suffix.lower() in _PICKLE_SUFFIXES:
        raise ScarceError(f"--weights {str(file)!r} looks like a pickle checkpoint ({file.suffix}), which can run code "
                          f"when loaded; save the weights with safetensors.torch.save_file(model.state_dict(), "
                          f"'model.safetensors') and pass that file")
    if not file.is_file():
        raise ScarceError(f"--weights {str(file)!r} is not a file")
    try:
        state = load_file(str(file))
    except (SafetensorError, OSError, ValueError) as exc:
        raise ScarceError(f"--weights {str(file)!r} is not a readable safetensors file ({exc})") from exc
    _check_state(model, state, file)
    model.load_state_dict(state, strict=True)
    return model


def _check_state(model: Any, state: dict[str, Any], file: Path) -> None:
    expected = model.state_dict()
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    shapes = [f"{k} {tuple(state[k].shape)} (model: {tuple(expected[k].shape)})"
              for k in sorted(set(state) & set(expected)) if tuple(state[k].shape) != tuple(expected[k].shape)]
    problems = []
    for what, keys in (("missing from the file", missing), ("not in the model", unexpected), ("with other shapes", shapes)):
        if keys:
            shown = ", ".join(keys[:8]) + (f", ... ({len(keys)} in all)" if len(keys) > 8 else "")
            problems.append(f"{what}: {shown}")
    if problems:
        raise ScarceError(f"--weights {str(file)!r} does not match the model ({type(model).__name__}); keys "
                          + "; ".join(problems))


def read_input(path: str | os.PathLike[str], shape: tuple[int, ...] | None = None) -> np.ndarray:
    """One input from ``.npy`` (no pickle) or an image file, optionally reshaped to ``shape``."""
    file = Path(path)
    if not file.is_file():
        raise ScarceError(f"--input {str(file)!r} is not a file")
    suffix = file.suffix.lower()
    if suffix == ".npy":
        try:
            x = np.load(file, allow_pickle=False)
        except ValueError as exc:
            raise ScarceError(f"--input {str(file)!r} is not a plain .npy array ({exc})") from exc
        if x.dtype.kind not in "biuf" or x.dtype.names:  # complex too: its imaginary part would be dropped
            raise ScarceError(f"--input {str(file)!r} holds {x.dtype} values; the input must be an array of real "
                              f"numbers (bool, integer or float)")
    elif suffix in _IMAGE_SUFFIXES:
        x = _read_image(file)
    else:
        raise ScarceError(f"--input {str(file)!r}: the format {suffix or '(none)'} is not read; give a .npy array or an "
                          f"image ({', '.join(_IMAGE_SUFFIXES)})")
    x = np.asarray(x, dtype=np.float64)
    if not np.isfinite(x).all():
        bad = np.flatnonzero(~np.isfinite(x.ravel()))
        raise ScarceError(f"--input {str(file)!r} holds {bad.size} value(s) that are not finite (NaN or inf), the "
                          f"first {x.ravel()[bad[0]]!r} at flat index {int(bad[0])}; the input must be real numbers")
    if shape is not None:
        if not shape or any(n <= 0 for n in shape):
            raise ScarceError(f"--shape must be positive sizes, e.g. 3,32,32; got {','.join(map(str, shape))}")
        if int(np.prod(shape)) != x.size:
            raise ScarceError(f"--shape {tuple(shape)} holds {int(np.prod(shape))} values; the input has {x.size} "
                              f"(shape {x.shape})")
        x = x.reshape(shape)
    return x


_SIXTEEN_BIT = ("I;16", "I;16B", "I;16L", "I;16N")


def _read_image(file: Path) -> np.ndarray:
    """Channels-first values in [0, 1]: 8-bit / 255, 16-bit / 65535, 1-bit as 0/1; alpha dropped."""
    try:
        from PIL import Image, UnidentifiedImageError
    except ImportError as exc:  # pragma: no cover - Pillow comes with matplotlib (the vision extra)
        raise ScarceError("reading images needs Pillow: pip install 'scarce[vision]'") from exc
    try:
        with Image.open(file) as image:
            mode = image.mode
            if mode in _SIXTEEN_BIT:
                pixels = np.asarray(image, dtype=np.float64) / 65535.0
            elif mode in ("I", "F"):
                raise ScarceError(f"--input {str(file)!r} holds {'32-bit integer' if mode == 'I' else 'floating-point'} "
                                  f"pixels, whose range an image file does not say; save the input as .npy with "
                                  f"values in the range the model takes")
            else:
                grey = mode in ("1", "L", "LA")
                pixels = np.asarray(image.convert("L" if grey else "RGB"), dtype=np.float64) / 255.0
    except (UnidentifiedImageError, OSError) as exc:
        raise ScarceError(f"--input {str(file)!r} is not a readable image ({exc})") from exc
    return pixels[None] if pixels.ndim == 2 else np.moveaxis(pixels, -1, 0)
