"""Any PyTorch classifier as the engine's model: logits from its forward, features from a named layer.

A user's model needs no special interface: :class:`TorchClassifier` calls it on a batch and
reads the logits from what it returns (a tensor of shape ``(n, n_classes)``, or an object with a
``logits`` attribute, as Hugging Face models return). The embedding that rulers score comes from
any named submodule through a forward hook (``features="layer3"``), flattened per input; without
a named layer it is the logits themselves. The layer must return a tensor whose first axis is
the batch (a module called several times in one pass gives its last call's output). The hook is
attached for one pass and removed after, so no hook stays on the user's module; the module is
put in eval mode before its first pass.

>>> import torch
>>> net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(12, 5), torch.nn.ReLU(), torch.nn.Linear(5, 3))
>>> logits, features = TorchClassifier(net, features="2").logits_and_features(torch.zeros(4, 3, 2, 2))
>>> tuple(logits.shape), tuple(features.shape)
((4, 3), (4, 5))
>>> TorchClassifier(net, features="relu")
Traceback (most recent call last):
...
scarce.errors.ScarceError: features='relu' names no layer of Sequential; its layers are: '0', '1', '2', '3'
"""

from __future__ import annotations

import difflib
from typing import Any

import torch

from scarce.errors import ScarceError

__all__ = ["TorchClassifier", "as_logits", "layer_names"]


def layer_names(module: Any) -> list[str]:
    """The names ``module.named_modules()`` gives its submodules (the root, ``""``, left out): what
    ``features=`` may name. Anything but a ``torch.nn.Module`` is refused."""
    if not isinstance(module, torch.nn.Module):
        raise ScarceError(f"layer_names takes a torch.nn.Module (the model whose layers features= may name), got "
                          f"{type(module).__name__}")
    return [name for name, _ in module.named_modules() if name]


def _named_layer(module: Any, name: str) -> Any:
    layers = dict(module.named_modules())
    if isinstance(name, str) and name and name in layers:
        return layers[name]
    names = layer_names(module)
    close = difflib.get_close_matches(str(name), names, n=3)
    hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    shown = ", ".join(repr(n) for n in names[:40]) + (f", ... ({len(names)} in all)" if len(names) > 40 else "")
    raise ScarceError(f"features={name!r} names no layer of {type(module).__name__}{hint}; its layers are: {shown}")


def as_logits(output: Any, n_inputs: int) -> Any:
    """The logits tensor in what a model returned (itself, its ``.logits``, or a tuple's first
    element), checked to be ``(n_inputs, n_classes)``."""
    if type(output) is torch.Tensor and output.ndim == 2 and output.shape[0] == n_inputs and output.shape[1] >= 2:
        return output  # the common case, checked
    logits = output if isinstance(output, torch.Tensor) else getattr(output, "logits", output)
    if isinstance(logits, (tuple, list)) and logits and isinstance(logits[0], torch.Tensor):
        logits = logits[0]
    if not isinstance(logits, torch.Tensor):
        raise ScarceError(f"the model must return a tensor of logits of shape (n, n_classes); it returned "
                          f"{type(output).__name__}")
    if logits.ndim != 2 or logits.shape[0] != n_inputs or logits.shape[1] < 2:
        hint = (f"; x0 seems to carry a batch axis of its own: pass one input without it (x0[0])"
                if logits.ndim == 3 and tuple(logits.shape[:2]) == (n_inputs, 1) else "")
        raise ScarceError(f"the model must return a 2-D batch of logits (n, n_classes) with n_classes >= 2; for a "
                          f"batch of {n_inputs} inputs it returned shape {tuple(logits.shape)}{hint}")
    return logits


class TorchClassifier:
    """A ``torch.nn.Module`` that maps a batch to logits, with features read from one of its layers.

    Parameters
    ----------
    module : torch.nn.Module
        Called as ``module(x)`` on a batch ``x`` of shape ``(n, *input_shape)``.
    features : str, optional
        Name of the submodule (as in ``module.named_modules()``, e.g. ``"layer3"``,
        ``"encoder.block.2"``) whose output is the embedding; ``None``: the logits.
    """

    def __init__(self, module: Any, features: str | None = None) -> None:
        if not isinstance(module, torch.nn.Module):
            raise ScarceError(f"model must be a torch.nn.Module mapping a batch to logits, got {type(module).__name__}: "
                              f"wrap a torch function in a Module, pass a model that answers with labels only as "
                              f"target= (beside a surrogate network as model=), or, for any other model, define "
                              f"the problem with scarce.RareEventProblem.from_score")
        self.module = module
        self.features = features
        self._layer = None if features is None else _named_layer(module, features)

    def to(self, device: Any) -> TorchClassifier:
        self.module.to(device)
        return self

    def eval(self) -> TorchClassifier:
        self.module.eval()
        return self

    @property
    def training(self) -> bool:
        """Whether the module is in training mode (then the next pass switches it off)."""
        return bool(self.module.training)

    def logits_and_features(self, x: Any) -> tuple[Any, Any]:
        """One forward pass: ``(logits (n, n_classes), features (n, k))``."""
        if self._layer is None:
            logits = as_logits(self.module(x), x.shape[0])
            return logits, logits
        captured: list[Any] = []

        def hook(_module: Any, _inputs: Any, output: Any) -> None:
            captured.append(output[0] if isinstance(output, (tuple, list)) else output)

        handle = self._layer.register_forward_hook(hook)
        try:
            logits = as_logits(self.module(x), x.shape[0])
        finally:
            handle.remove()
        if not captured:
            raise ScarceError(f"layer {self.features!r} did not run in the model's forward pass, so it gives no "
                              f"features; name a layer the forward pass uses")
        out = captured[-1]
        if not isinstance(out, torch.Tensor) or out.ndim == 0 or out.shape[0] != x.shape[0]:
            shape = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
            raise ScarceError(f"layer {self.features!r} returned {shape} for a batch of {x.shape[0]} inputs; features "
                              f"need a tensor whose first axis is the batch (a sequence model without batch_first "
                              f"puts time first): name another layer")
        return logits, out.reshape(x.shape[0], -1)

    def __repr__(self) -> str:
        return f"TorchClassifier({type(self.module).__name__}, features={self.features!r})"
