"""Keep freed large arrays in the process heap (glibc ``mallopt``) instead of unmapping them.

Subset Simulation allocates and frees arrays of 10-20 MB at every MCMC step and level (a batch
of 784-pixel candidates, a level's states). glibc serves blocks above its mmap threshold with
fresh ``mmap`` calls and returns them with ``munmap``, so each step pays page faults to zero the
pages again. Raising the mmap threshold and the trim threshold keeps those blocks in the heap:
on the quick vision problem the system time of a run fell from 5.6 s to about 1.5 s and the
forward passes got about 15% faster. Glibc only; elsewhere this does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import sys

__all__ = ["keep_large_blocks"]

_M_TRIM_THRESHOLD = -1
_M_TOP_PAD = -2
_M_MMAP_THRESHOLD = -3
_MMAP_MAX = 32 << 20  # glibc's ceiling for M_MMAP_THRESHOLD on 64-bit systems


@functools.lru_cache(maxsize=1)
def keep_large_blocks(trim_threshold: int = 512 << 20) -> bool:
    """Tune glibc's allocator of this process once; True when it was applied."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    ok = mallopt(_M_MMAP_THRESHOLD, _MMAP_MAX)
    ok &= mallopt(_M_TRIM_THRESHOLD, int(trim_threshold))
    ok &= mallopt(_M_TOP_PAD, 64 << 20)
    return bool(ok)
