"""Checking a ``device`` argument (``"cpu"``, ``"cuda"``, ``"cuda:<i>"``, ``"mps"``) up front.

torch raises an ``AssertionError`` ("Torch not compiled with CUDA enabled") or a
``RuntimeError`` only when the first tensor is moved, after the corpus was read and the model
loaded; :func:`check_device` says at once which device is wrong and which ones there are.
torch is imported only when a GPU device is named.
"""

from __future__ import annotations

import re

from scarce.errors import ScarceError

__all__ = ["available_devices", "check_device"]

_FORM = re.compile(r"^(cpu|mps|cuda)(?::(\d+))?$")


def available_devices() -> list[str]:
    """The devices this torch build can use: ``cpu``, then ``cuda:<i>`` and ``mps`` when present."""
    import torch

    devices = ["cpu"]
    if torch.cuda.is_available():
        devices += [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        devices.append("mps")
    return devices


def check_device(device: object) -> str | None:
    """Return ``device`` in canonical form if this machine can run a model there; None stays None.

    The name is matched without surrounding spaces and case (``' CPU'``, ``'Cuda:0'``), and the
    form returned is the one torch accepts (``'cpu'``, ``'cuda:0'``), so the value can be passed
    to ``tensor.to(...)`` as it is.

    Raises
    ------
    ScarceError
        ``device`` is not a string of the form ``cpu``, ``cuda``, ``cuda:<i>`` or ``mps``, or it
        names a device this build or machine lacks (the message lists the available ones).
    """
    if device is None:
        return None
    if not isinstance(device, str):
        raise ScarceError(f"device must be a string such as 'cpu', 'cuda' or 'cuda:0', got {device!r} "
                          f"({type(device).__name__})")
    canonical = device.strip().lower()
    match = _FORM.fullmatch(canonical)
    if match is None:
        raise ScarceError(f"device must be 'cpu', 'cuda', 'cuda:<index>' or 'mps', got {device!r}")
    kind, index = match.group(1), match.group(2)
    if kind == "cpu":
        if index not in (None, "0"):
            raise ScarceError(f"device {device!r}: the CPU takes no index; use 'cpu'")
        return canonical
    available = available_devices()
    wanted = f"{kind}:{index}" if kind == "cuda" and index is not None else kind
    present = any(d == wanted or d.startswith(f"{wanted}:") for d in available)
    if not present:
        why = ("this torch build has no CUDA support or sees no GPU" if kind == "cuda"
               and not any(d.startswith("cuda") for d in available) else "it is not present")
        raise ScarceError(f"device {device!r} cannot be used: {why}; available devices: "
                          f"{', '.join(available)}")
    return canonical
