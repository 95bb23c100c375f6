"""MNIST loading: the IDX format, md5 checks, missing and malformed files, and the splits."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np
import pytest

from scarce.datasets import mnist
from scarce.datasets import EMBEDDED_SOURCE, MnistSplits, download_mnist, load_mnist, read_idx, write_idx
from scarce.errors import ScarceError

NAMES = list(mnist.MNIST_FILES)
TRAIN_IMAGES, TRAIN_LABELS, TEST_IMAGES, TEST_LABELS = NAMES


@pytest.fixture(autouse=True)
def _no_env(monkeypatch):
    """Tests see the embedded default unless they set SCARCE_DATA_DIR themselves."""
    monkeypatch.delenv(mnist.ENV_VAR, raising=False)


def _fake_mnist(directory: Path, *, n_train: int = 40, n_test: int = 60, compress=(True, False, True, False),
                image_shape=(28, 28)) -> dict[str, str]:
    """Write four small IDX files; pixel [0, 0] of image i holds i % 256 so splits can be traced.

    Returns the md5 of each file's uncompressed content (what MNIST_FILES would list).
    """
    rng = np.random.default_rng(0)
    directory.mkdir(parents=True, exist_ok=True)
    arrays = {}
    for images_name, labels_name, n in ((TRAIN_IMAGES, TRAIN_LABELS, n_train), (TEST_IMAGES, TEST_LABELS, n_test)):
        images = rng.integers(0, 256, size=(n, *image_shape), dtype=np.uint8)
        images[:, 0, 0] = np.arange(n) % 256
        arrays[images_name] = images
        arrays[labels_name] = (np.arange(n) % 10).astype(np.uint8)
    sums = {}
    for (name, array), gz in zip(arrays.items(), compress):
        path = write_idx(directory / (name + (".gz" if gz else "")), array, compress=gz)
        sums[name] = hashlib.md5(mnist._read_bytes(path)).hexdigest()
    return {name: sums[name] for name in NAMES}


# --------------------------------------------------------------------------- IDX format

@pytest.mark.parametrize("compress", [False, True])
@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int16, np.int32, np.float32, np.float64])
def test_idx_round_trip(tmp_path, compress, dtype):
    array = (np.arange(2 * 3 * 4) - 7).reshape(2, 3, 4).astype(dtype)
    path = write_idx(tmp_path / "a-idx3", array, compress=compress)
    back = read_idx(path)
    assert back.dtype == np.dtype(dtype) and back.dtype.isnative
    np.testing.assert_array_equal(back, array)
    assert (path.read_bytes()[:2] == b"\x1f\x8b") is compress
    back[0, 0, 0] = 1   # writable


def test_idx_header_is_the_documented_big_endian_layout(tmp_path):
    path = write_idx(tmp_path / "x", np.array([[1, 2, 3]], dtype=np.uint8))
    assert path.read_bytes() == bytes([0, 0, 0x08, 2, 0, 0, 0, 1, 0, 0, 0, 3, 1, 2, 3])
    path = write_idx(tmp_path / "y", np.array([258], dtype=np.int16))
    assert path.read_bytes() == bytes([0, 0, 0x0B, 1, 0, 0, 0, 1, 1, 2])


def test_gzip_is_detected_by_magic_bytes_not_by_name(tmp_path):
    array = np.arange(10, dtype=np.uint8)
    path = write_idx(tmp_path / "labels-idx1-ubyte", array, compress=True)   # no .gz suffix
    np.testing.assert_array_equal(read_idx(path), array)
    gz_named_raw = write_idx(tmp_path / "raw.gz", array)                       # .gz name, raw content
    np.testing.assert_array_equal(read_idx(gz_named_raw), array)


@pytest.mark.parametrize("array", [np.zeros(3, dtype=np.int64), np.zeros(3, dtype=bool), np.zeros((), np.uint8)])
def test_write_idx_rejects_what_idx_cannot_store(tmp_path, array):
    with pytest.raises(ScarceError, match="array"):
        write_idx(tmp_path / "x", array)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("content", "match"),
    [
        (b"\x00\x00", "truncated"),
        (b"\x01\x00\x08\x01\x00\x00\x00\x01\x05", "not an IDX file"),
        (b"\x00\x00\x0a\x01\x00\x00\x00\x01\x05", "type code 0x0A"),
        (b"\x00\x00\x08\x00", "0 dimensions"),
        (b"\x00\x00\x08\x03\x00\x00\x00\x01", "header alone needs 16"),
        (b"\x00\x00\x08\x01\x00\x00\x00\x04\x01\x02", r"truncated: its header declares shape \(4,\)"),
        (b"\x00\x00\x08\x01\x00\x00\x00\x01\x01\x02", "1 extra bytes"),
    ],
)
def test_read_idx_rejects_malformed_files_naming_them(tmp_path, content, match):
    path = tmp_path / "bad-idx"
    path.write_bytes(content)
    with pytest.raises(ScarceError, match=match) as info:
        read_idx(path)
    assert str(path) in str(info.value)


def test_truncated_gzip_is_a_clear_error(tmp_path):
    path = write_idx(tmp_path / "t.gz", np.arange(5000, dtype=np.int32), compress=True)
    path.write_bytes(path.read_bytes()[:-30])
    with pytest.raises(ScarceError, match="truncated or corrupt gzip") as info:
        read_idx(path)
    assert str(path) in str(info.value)


def test_truncated_mnist_file_names_the_file(tmp_path):
    _fake_mnist(tmp_path)
    path = tmp_path / TEST_LABELS
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(ScarceError, match="truncated") as info:
        load_mnist(tmp_path, verify=False, seed_pool_size=10)
    assert str(path) in str(info.value)


# --------------------------------------------------------------------------- full MNIST layout

def test_directory_splits_sizes_disjointness_and_order(tmp_path):
    _fake_mnist(tmp_path, n_train=40, n_test=60)
    splits = load_mnist(tmp_path, verify=False, seed_pool_size=20)
    assert isinstance(splits, MnistSplits)
    assert splits.source == f"mnist:{tmp_path.resolve()}"
    assert (splits.train_images.shape, splits.test_images.shape, splits.seed_images.shape) == (
        (40, 28, 28), (40, 28, 28), (20, 28, 28))
    for images, labels in ((splits.train_images, splits.train_labels), (splits.test_images, splits.test_labels),
                           (splits.seed_images, splits.seed_labels)):
        assert images.dtype == np.float32 and labels.dtype == np.int64
        assert images.min() >= 0.0 and images.max() <= 1.0
    ids_test = np.rint(splits.test_images[:, 0, 0] * 255).astype(int)
    ids_seed = np.rint(splits.seed_images[:, 0, 0] * 255).astype(int)
    assert not set(ids_test) & set(ids_seed)
    assert sorted([*ids_test, *ids_seed]) == list(range(60))
    np.testing.assert_array_equal(np.diff(ids_test) > 0, True)           # t10k order kept
    np.testing.assert_array_equal(splits.seed_labels, ids_seed % 10)       # labels travel with images
    np.testing.assert_array_equal(np.bincount(splits.seed_labels), 2)    # stratified: 2 per class
    np.testing.assert_array_equal(np.rint(splits.train_images[:, 0, 0] * 255), np.arange(40))
    assert str(tmp_path.resolve()) in splits.describe() and "seed pool" in splits.describe()
    assert "train=40" in repr(splits)


def test_directory_split_is_deterministic_and_seeded(tmp_path):
    _fake_mnist(tmp_path)
    a = load_mnist(tmp_path, verify=False, seed_pool_size=20, split_seed=3)
    b = load_mnist(tmp_path, verify=False, seed_pool_size=20, split_seed=3)
    c = load_mnist(tmp_path, verify=False, seed_pool_size=20, split_seed=4)
    np.testing.assert_array_equal(a.seed_images, b.seed_images)
    assert not np.array_equal(a.seed_images, c.seed_images)
    assert a.split_seed == 3


def test_stratified_choice_follows_unequal_class_shares():
    labels = np.repeat(np.arange(3), [50, 30, 20])
    picked = mnist._stratified_choice(labels, 10, np.random.default_rng(0))
    np.testing.assert_array_equal(np.bincount(labels[picked]), [5, 3, 2])
    assert len(set(picked)) == 10
    picked = mnist._stratified_choice(labels, 7, np.random.default_rng(0))   # 3.5, 2.1, 1.4 -> 4, 2, 1
    np.testing.assert_array_equal(np.bincount(labels[picked]), [4, 2, 1])


def test_md5_verified_when_sums_match(tmp_path, monkeypatch):
    sums = _fake_mnist(tmp_path)
    monkeypatch.setattr(mnist, "MNIST_FILES", sums)
    splits = load_mnist(tmp_path, seed_pool_size=10)
    assert splits.seed_labels.size == 10


def test_md5_mismatch_names_file_expected_and_actual(tmp_path, monkeypatch):
    sums = _fake_mnist(tmp_path)
    wrong = dict(sums, **{TEST_IMAGES: "0" * 32})
    monkeypatch.setattr(mnist, "MNIST_FILES", wrong)
    with pytest.raises(ScarceError) as info:
        load_mnist(tmp_path, seed_pool_size=10)
    message = str(info.value)
    assert str(tmp_path / (TEST_IMAGES + ".gz")) in message
    assert "0" * 32 in message and sums[TEST_IMAGES] in message and "verify=False" in message
    assert load_mnist(tmp_path, seed_pool_size=10, verify=False).seed_labels.size == 10


def test_official_sums_reject_custom_data_unless_verify_is_off(tmp_path):
    _fake_mnist(tmp_path)
    with pytest.raises(ScarceError, match="md5"):
        load_mnist(tmp_path, seed_pool_size=10)
    load_mnist(tmp_path, seed_pool_size=10, verify=False)


def test_missing_files_are_listed_with_where_it_looked(tmp_path):
    _fake_mnist(tmp_path)
    (tmp_path / (TRAIN_IMAGES + ".gz")).unlink()
    (tmp_path / TEST_LABELS).unlink()
    with pytest.raises(ScarceError) as info:
        load_mnist(tmp_path, verify=False)
    message = str(info.value)
    assert TRAIN_IMAGES in message and TEST_LABELS in message
    assert TRAIN_LABELS not in message and str(tmp_path) in message and "data_dir" in message


def test_not_a_directory(tmp_path):
    with pytest.raises(ScarceError, match="data_dir=.*is not a directory"):
        load_mnist(tmp_path / "nowhere")


def test_mnist_subdirectory_is_searched(tmp_path):
    _fake_mnist(tmp_path / "mnist")
    splits = load_mnist(tmp_path, verify=False, seed_pool_size=10)
    assert splits.source == f"mnist:{(tmp_path / 'mnist').resolve()}"


def test_wrong_image_shape(tmp_path):
    _fake_mnist(tmp_path, image_shape=(27, 28))
    with pytest.raises(ScarceError, match=r"shape \(n, 28, 28\); got shape \(40, 27, 28\)"):
        load_mnist(tmp_path, verify=False, seed_pool_size=10)


def test_bad_labels(tmp_path):
    _fake_mnist(tmp_path)
    write_idx(tmp_path / TRAIN_LABELS, np.full(40, 10, dtype=np.uint8))
    with pytest.raises(ScarceError, match=r"labels \[10\]; allowed: 0..9"):
        load_mnist(tmp_path, verify=False, seed_pool_size=10)
    write_idx(tmp_path / TRAIN_LABELS, np.zeros(39, dtype=np.uint8))
    with pytest.raises(ScarceError, match="40 integer labels"):
        load_mnist(tmp_path, verify=False, seed_pool_size=10)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"seed_pool_size": 31}, "seed_pool_size must be at most 30"),
    ({"seed_pool_size": 0}, "seed_pool_size must be an integer >= 1"),
    ({"seed_pool_size": 10, "split_seed": -1}, "split_seed must be an integer >= 0"),
    ({"seed_pool_size": 10, "verify": "yes"}, "verify must be True or False"),
])
def test_bad_parameters(tmp_path, kwargs, match):
    _fake_mnist(tmp_path)
    with pytest.raises(ScarceError, match=match):
        load_mnist(tmp_path, **{"verify": False, **kwargs})


# --------------------------------------------------------------------------- where the data come from

def test_environment_variable_selects_the_directory(tmp_path, monkeypatch):
    _fake_mnist(tmp_path)
    monkeypatch.setenv("SCARCE_DATA_DIR", str(tmp_path))
    splits = load_mnist(verify=False, seed_pool_size=10)
    assert splits.source == f"mnist:{tmp_path.resolve()}"
    assert load_mnist(EMBEDDED_SOURCE).source == EMBEDDED_SOURCE      # explicit embedded wins
    assert load_mnist(splits.source, verify=False, seed_pool_size=10).source == splits.source
    monkeypatch.setenv("SCARCE_DATA_DIR", str(tmp_path / "missing"))
    with pytest.raises(ScarceError, match="SCARCE_DATA_DIR"):
        load_mnist()


def test_embedded_default_splits():
    splits = load_mnist()
    assert splits.source == EMBEDDED_SOURCE
    sizes = (splits.train_labels.size, splits.test_labels.size, splits.seed_labels.size)
    assert sizes == (3500, 1000, 500)
    for images, labels, per_class in ((splits.train_images, splits.train_labels, 350),
                                      (splits.test_images, splits.test_labels, 100),
                                      (splits.seed_images, splits.seed_labels, 50)):
        assert images.shape == (labels.size, 28, 28) and images.dtype == np.float32
        assert labels.dtype == np.int64 and 0.0 <= images.min() and images.max() == 1.0
        np.testing.assert_array_equal(np.bincount(labels, minlength=10), per_class)
        assert len(set(labels[:30].tolist())) >= 6     # shuffled, not grouped by class
    rows = [{r.tobytes() for r in images} for images in (splits.train_images, splits.test_images, splits.seed_images)]
    assert sum(map(len, rows)) == 5000 and len(set().union(*rows)) == 5000   # disjoint and complete
    raw_images, raw_labels = mnist._embedded_raw()
    by_bytes = {(r.astype(np.float32) / 255).tobytes(): lab for r, lab in zip(raw_images, raw_labels)}
    assert all(by_bytes[img.tobytes()] == lab for img, lab in zip(splits.seed_images, splits.seed_labels))


def test_embedded_default_is_deterministic_and_seeded():
    a, b, c = load_mnist(), load_mnist(split_seed=0), load_mnist(split_seed=1)
    for field in ("train_images", "train_labels", "test_images", "seed_images", "seed_labels"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
    assert not np.array_equal(a.seed_images, c.seed_images)
    a.train_images[:] = 0.5            # returned arrays are the caller's own, not a shared cache
    np.testing.assert_array_equal(load_mnist().train_images, b.train_images)


def test_embedded_seed_pool_size():
    splits = load_mnist(seed_pool_size=300)
    assert (splits.train_labels.size, splits.test_labels.size, splits.seed_labels.size) == (3700, 1000, 300)
    np.testing.assert_array_equal(np.bincount(splits.seed_labels), 30)
    with pytest.raises(ScarceError, match="at most 1500"):
        load_mnist(seed_pool_size=1501)


# --------------------------------------------------------------------------- download (local mirror, no network)

def test_download_from_a_local_mirror(tmp_path, monkeypatch):
    mirror = tmp_path / "mirror"
    sums = _fake_mnist(mirror, compress=(True, True, True, True))
    monkeypatch.setattr(mnist, "MNIST_FILES", sums)
    target = download_mnist(tmp_path / "data", mirror=["file:///nonexistent/", mirror.as_uri() + "/"])
    assert sorted(p.name for p in target.iterdir()) == sorted(f"{n}.gz" for n in NAMES)
    assert load_mnist(target, seed_pool_size=10).seed_labels.size == 10
    download_mnist(target, mirror="file:///nonexistent/")   # everything present and verified: no fetch
    # the files follow the user's umask like any file they create (not mkstemp's 0600)
    mask = os.umask(0o022)
    os.umask(mask)
    assert {p.stat().st_mode & 0o777 for p in target.iterdir()} == {0o666 & ~mask}


def test_download_rejects_a_bad_md5_and_leaves_nothing(tmp_path, monkeypatch):
    mirror = tmp_path / "mirror"
    sums = _fake_mnist(mirror, compress=(True, True, True, True))
    monkeypatch.setattr(mnist, "MNIST_FILES", dict(sums, **{TRAIN_IMAGES: "f" * 32}))
    with pytest.raises(ScarceError, match=f"could not download {TRAIN_IMAGES}.*expected f{{32}}"):
        download_mnist(tmp_path / "data", mirror=mirror.as_uri())
    assert list((tmp_path / "data").iterdir()) == []


# --------------------------------------------------------------------------- the real files, where present

def _real_mnist_dir() -> str | None:
    for candidate in (os.environ.get("SCARCE_DATA_DIR"), "/work/shared/data/mnist"):
        if candidate and all(mnist._find_one(Path(candidate), n) for n in NAMES):
            return candidate
    return None


@pytest.mark.skipif(_real_mnist_dir() is None, reason="full MNIST files not available")
def test_real_mnist_md5_and_splits():
    splits = load_mnist(_real_mnist_dir())
    assert (splits.train_labels.size, splits.test_labels.size, splits.seed_labels.size) == (60000, 9000, 1000)
    assert splits.train_images.shape == (60000, 28, 28)
    t10k = np.bincount(np.concatenate([splits.test_labels, splits.seed_labels]), minlength=10)
    assert np.all(np.abs(np.bincount(splits.seed_labels, minlength=10) - t10k / 10) < 1)
