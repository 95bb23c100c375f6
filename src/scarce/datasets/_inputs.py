"""The readers' arguments and files, checked so that every failure is a
:class:`~scarce.errors.ScarceError` naming the parameter or the file.

Paths are checked by :func:`scarce.checks.check_path`. A file is opened without blocking and
must be a regular file: a named pipe would block the reader forever and a device such as
``/dev/zero`` never ends. A name given as an option (a method, a
model) must be a non-empty string of valid Unicode: it becomes part of every record id.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

from scarce.errors import ScarceError, show

__all__ = ["check_name", "check_unicode", "is_dir", "open_regular"]


def is_dir(path: Path) -> bool:
    """Whether ``path`` is a directory; False (not an error) for a name the system cannot even look up."""
    try:
        return path.is_dir()
    except (OSError, ValueError):  # a name too long, a NUL byte
        return False


def open_regular(path: Path, what: str) -> BinaryIO:
    """``path`` opened for binary reading after checking that it is a regular file.

    Opened non-blocking, so a named pipe is refused instead of waiting for a writer; the check
    is made on the opened file, so it cannot be swapped between the check and the read.
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise ScarceError(f"{what} {str(path)!r} does not exist") from None
    except (OSError, ValueError) as exc:
        message = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise ScarceError(f"{what} {str(path)!r} cannot be read: {message}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ScarceError(f"{what} {str(path)!r} is not a regular file (a directory, pipe or device); "
                          "allowed: a regular file")
    return os.fdopen(fd, "rb")


def check_unicode(text: str, where: str) -> str:
    """``text`` if UTF-8 can encode it; a lone surrogate (``"\\ud800"``, which JSON escapes can
    produce but no real text holds) is a :class:`ScarceError` naming ``where``."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ScarceError(f"{where} is not valid Unicode text: {exc.reason} at position {exc.start} "
                          f"({show(text)}); allowed: text UTF-8 can encode") from None
    return text


def check_name(value: object, name: str, *, optional: bool = False) -> str | None:
    """``value`` as a name (a method, a model): a non-empty string of valid Unicode, or None when
    ``optional``; anything else is a :class:`ScarceError` naming ``name``."""
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value.strip():
        allowed = "a non-empty string" + (" or None" if optional else "")
        raise ScarceError(f"{name} must be {allowed}, got {show(value)} ({type(value).__name__})")
    return check_unicode(value, name)
