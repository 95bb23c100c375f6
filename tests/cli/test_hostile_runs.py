"""Hostile runs: checkpoints, run directories, pool workers, resource bounds and bad CLI input.

Each test pins one reproducer of issue 18 (chunked Monte Carlo, the result store, the executors,
the vision configuration, the MNIST readers and the top-level CLI).
"""

from __future__ import annotations

import errno
import gzip
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import tracemalloc
import warnings
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from scarce.cli import app
from scarce.datasets import mnist
from scarce.datasets.mnist import read_idx, write_idx
from scarce.errors import ScarceError
from scarce.experiments.montecarlo import ChunkedMonteCarlo
from scarce.experiments.store import CorruptResultWarning, ResultStore
from scarce.problem import RareEventProblem

runner = CliRunner()


def _threshold_problem(threshold: float) -> RareEventProblem:
    """``u_0 >= threshold`` in two dimensions, under the default name "problem"."""
    return RareEventProblem.from_score(lambda u: u[:, 0], dim=2, threshold=threshold)


# -- chunked Monte Carlo -------------------------------------------------------------------------
def test_chunked_mc_two_problems_of_one_name_do_not_share_checkpoints(tmp_path):
    mc = ChunkedMonteCarlo(n_samples=20_000, chunk_size=10_000, batch_size=5_000)
    frequent, rare = _threshold_problem(1.0), _threshold_problem(3.0)
    assert frequent.name == rare.name == "problem" and frequent.dim == rare.dim
    mc.estimate(frequent, seed=0, checkpoint_dir=tmp_path)
    with pytest.raises(ScarceError, match="different configuration.*fingerprint"):
        mc.estimate(rare, seed=0, checkpoint_dir=tmp_path)
    # the same problem rebuilt (another object, same outputs) resumes from the checkpoints
    again = mc.estimate(_threshold_problem(1.0), seed=0, checkpoint_dir=tmp_path)
    assert again.n_failed == mc.estimate(frequent, seed=0).n_failed


def test_chunked_mc_partial_last_chunk_is_recomputed_for_a_larger_budget(tmp_path):
    problem = _threshold_problem(1.0)
    small = ChunkedMonteCarlo(n_samples=15_000, chunk_size=10_000, batch_size=5_000)
    large = ChunkedMonteCarlo(n_samples=20_000, chunk_size=10_000, batch_size=5_000)
    assert small.estimate(problem, seed=0, checkpoint_dir=tmp_path).n_samples == 15_000
    computed: list[str] = []
    resumed = large.estimate(problem, seed=0, checkpoint_dir=tmp_path,
                             progress=lambda done, total, key: computed.append(key))
    fresh = large.estimate(problem, seed=0)
    assert (resumed.n_samples, resumed.n_failed) == (20_000, fresh.n_failed)
    assert computed == ["resumed", "chunk-000000001"]  # the full first chunk is reused
    computed.clear()
    larger = ChunkedMonteCarlo(n_samples=30_000, chunk_size=10_000, batch_size=5_000)
    larger.estimate(problem, seed=0, checkpoint_dir=tmp_path, progress=lambda d, t, key: computed.append(key))
    assert computed == ["resumed", "chunk-000000002"]


def test_chunked_mc_dtype_and_batch_are_part_of_the_checkpoint_identity(tmp_path):
    problem = _threshold_problem(1.0)
    ChunkedMonteCarlo(n_samples=2_000, chunk_size=1_000, batch_size=500).estimate(
        problem, seed=0, checkpoint_dir=tmp_path)
    for other in (ChunkedMonteCarlo(n_samples=2_000, chunk_size=1_000, batch_size=500, dtype="float32"),
                  ChunkedMonteCarlo(n_samples=2_000, chunk_size=1_000, batch_size=250)):
        with pytest.raises(ScarceError, match="different configuration"):
            other.estimate(problem, seed=0, checkpoint_dir=tmp_path)


def test_chunked_mc_chunk_recording_another_count_is_recomputed(tmp_path):
    problem = _threshold_problem(1.0)
    mc = ChunkedMonteCarlo(n_samples=2_000, chunk_size=1_000, batch_size=500)
    reference = mc.estimate(problem, seed=0, checkpoint_dir=tmp_path)
    store = ResultStore(tmp_path, json.loads((tmp_path / "config.json").read_text())["config"])
    store.save("chunk-000000000", {"chunk": 0, "n_samples": 1_000_000, "n_failed": 999_999, "wall": 0.0})
    assert mc.estimate(problem, seed=0, checkpoint_dir=tmp_path).n_failed == reference.n_failed


# -- the result store ----------------------------------------------------------------------------
def test_store_task_file_with_changed_numbers_is_reported_and_recomputed(tmp_path):
    store = ResultStore(tmp_path, {"a": 1})
    store.save("t", {"n_failed": 3})
    path = tmp_path / "tasks" / "t.json"
    path.write_text(path.read_text().replace('"n_failed": 3', '"n_failed": 4'))
    with pytest.warns(CorruptResultWarning, match="corrupted"):
        assert store.load("t") is None


def test_store_json_nested_200000_deep_is_a_clear_error(tmp_path):
    store = ResultStore(tmp_path, {"a": 1})
    deep = "[" * 200_000 + "]" * 200_000
    (tmp_path / "tasks").mkdir(exist_ok=True)
    (tmp_path / "tasks" / "t.json").write_text(deep)
    with pytest.warns(CorruptResultWarning):
        assert store.load("t") is None
    (tmp_path / "errors" / "e.json").parent.mkdir(exist_ok=True)
    (tmp_path / "errors" / "e.json").write_text(deep)
    assert store.errors()["e"]["type"] == "unreadable"
    (tmp_path / "config.json").write_text(deep)
    with pytest.raises(ScarceError, match="nested too deeply"):
        ResultStore(tmp_path, {"a": 1})
    with pytest.raises(ScarceError, match="nested too deeply"):
        ResultStore.open(tmp_path)


def test_store_config_whose_fingerprint_does_not_match_is_refused(tmp_path):
    ResultStore(tmp_path, {"a": 1})
    path = tmp_path / "config.json"
    path.write_text(path.read_text().replace('"a": 1', '"a": 2'))
    with pytest.raises(ScarceError, match="damaged"):
        ResultStore(tmp_path, {"a": 2})


def test_store_refuses_an_empty_run_directory_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ScarceError, match="non-empty path.*current directory"):
        ResultStore("", {"a": 1})
    assert list(tmp_path.iterdir()) == []


def test_store_run_directory_that_is_a_file_is_a_clear_error(tmp_path):
    path = tmp_path / "file"
    path.write_text("keep me")
    with pytest.raises(ScarceError, match="not a directory"):
        ResultStore(path, {"a": 1})
    with pytest.raises(ScarceError, match="cannot (open|read) .*Not a directory"):
        ResultStore(path / "run", {"a": 1})
    assert path.read_text() == "keep me"


def test_store_name_of_256_bytes_is_a_clear_error(tmp_path):
    with pytest.raises(ScarceError, match="File name too long"):
        ResultStore(tmp_path / ("x" * 256), {"a": 1})


def _fail_writes(monkeypatch, code: int) -> None:
    """Every atomic write fails as a full disk (ENOSPC) or a read-only directory (EROFS) would."""
    import scarce._atomic as atomic

    def mkstemp(*args, **kwargs):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(atomic.tempfile, "mkstemp", mkstemp)


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EROFS, errno.EACCES])
def test_store_full_disk_or_read_only_directory_is_a_clear_error_and_keeps_files(tmp_path, monkeypatch, code):
    store = ResultStore(tmp_path, {"a": 1})
    store.save("t", {"v": 1})
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    _fail_writes(monkeypatch, code)
    with pytest.raises(ScarceError, match=f"cannot write .*t.json.*{os.strerror(code)}"):
        store.save("t", {"v": 2})
    with pytest.raises(ScarceError, match="cannot write .*config.json"):
        ResultStore(tmp_path / "new", {"a": 1})
    monkeypatch.undo()
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before
    assert store.load("t") == {"v": 1}


# -- the executors -------------------------------------------------------------------------------
_POOL_SCRIPT = textwrap.dedent("""
    import json, os, time
    from scarce.experiments.executors import ProcessExecutor

    if __name__ == "__main__":
        pool = ProcessExecutor(2)
        pids = pool.map(lambda task: (time.sleep(0.2), os.getpid())[1], range(4))
        print(json.dumps(sorted(set(pids))), flush=True)
        time.sleep(120)
""")


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")
def _start_script(tmp_path: Path, name: str, text: str) -> subprocess.Popen:
    """Run ``text`` as a Python script in its own process, its stdout piped."""
    script = tmp_path / name
    script.write_text(text)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, env=env)


def _kill_and_wait_for(parent: subprocess.Popen, pids: list[int]) -> list[int]:
    """SIGKILL ``parent``, wait up to 10 s for ``pids`` to exit, and return those still alive."""
    parent.send_signal(signal.SIGKILL)
    parent.wait(timeout=10)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(_alive(pid) for pid in pids):
        time.sleep(0.05)
    return [pid for pid in pids if _alive(pid)]


def test_process_pool_workers_and_resource_tracker_die_with_a_killed_parent(tmp_path):
    parent = _start_script(tmp_path, "pool.py", _POOL_SCRIPT)
    try:
        workers = json.loads(parent.stdout.readline())
        helpers = _children(parent.pid)  # the workers and multiprocessing's resource tracker
        assert set(workers) <= set(helpers) and len(helpers) >= 2
        assert not _kill_and_wait_for(parent, helpers)
    finally:
        if parent.poll() is None:
            parent.kill()
        for pid in _children(parent.pid):
            os.kill(pid, signal.SIGKILL)


_LATE_INIT_SCRIPT = textwrap.dedent("""
    import multiprocessing, os, time
    from scarce.experiments.executors import _die_with_parent

    def late_initializer(parent):
        while os.getppid() == parent:   # the parent dies before the initializer runs
            time.sleep(0.01)
        _die_with_parent()
        time.sleep(60)

    if __name__ == "__main__":
        child = multiprocessing.get_context("spawn").Process(target=late_initializer, args=(os.getpid(),))
        child.start()
        print(child.pid, flush=True)
        time.sleep(60)
""")


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")
def test_pool_worker_whose_parent_died_before_its_initializer_exits(tmp_path):
    parent = _start_script(tmp_path, "late.py", _LATE_INIT_SCRIPT)
    child = None
    try:
        child = int(parent.stdout.readline())
        assert not _kill_and_wait_for(parent, [child])   # it did not watch init, its new parent, forever
    finally:
        if parent.poll() is None:
            parent.kill()
        if child is not None and _alive(child):
            os.kill(child, signal.SIGKILL)


# -- the vision configuration and application ----------------------------------------------------
def _vision(args: list[str], tmp_path: Path):
    return runner.invoke(app, ["vision", "--preset", "tiny", "--executor", "serial",
                               "--run-dir", str(tmp_path / "run"), *args])


@pytest.mark.parametrize(("setting", "message"), [
    ("n_train_seeds=0", "n_train_seeds must be an integer >= 1, got 0"),
    ("n_eval=0", "n_eval must be an integer >= 1, got 0"),
    ("n_eval=-1", "n_eval must be an integer >= 1, got -1"),
    ("top_k=-1", "top_k must be an integer >= 1, got -1"),
    ("max_probability=-1", r"max_probability must be in \(0, 1\], got -1"),
    ("n_candidates=1e9", "n_candidates must be at most the 500 images"),
    ("methods.smc_samples=1e9", "model queries.*methods.smc_samples.*allow_large=true"),
    ("n_train_seeds=1e18", "GiB of memory.*n_train_seeds.*allow_large=true"),
    ("classifier.conv1_channels=100000", "GiB of memory.*classifier.*allow_large=true"),
    ("classifier.epochs=1e9", "image passes of training.*classifier.epochs.*allow_large=true"),
    ("classifier.min_steps=1e12", "image passes of training.*min_steps.*allow_large=true"),
    ("methods.level_probability=nan", r"methods.level_probability takes a value like 0.1 \(a finite number\)"),
    ("scale=nan", r"scale='nan': scale takes a value like 0.35 \(a finite number\)"),
])
def test_vision_bad_or_oversized_settings_are_refused_before_any_work(tmp_path, setting, message):
    start = time.perf_counter()
    result = _vision(["--set", setting], tmp_path)
    assert result.exit_code == 2, result.output
    assert result.output.startswith("error: ") and "Traceback" not in result.output
    assert __import__("re").search(message, result.output.replace("\n", " ")), result.output
    assert not (tmp_path / "run").exists()
    assert time.perf_counter() - start < 10


def test_vision_allow_large_overrides_the_resource_bounds():
    from scarce.applications.vision.protocol import get_preset, parse_overrides

    with pytest.raises(ScarceError, match="allow_large"):
        get_preset("quick", **parse_overrides(["methods.smc_samples=1e9"]))
    preset = get_preset("quick", **parse_overrides(["methods.smc_samples=1e9", "allow_large=true"]))
    assert preset.methods.smc_samples == 10**9
    with pytest.raises(ScarceError, match="image passes of training"):
        get_preset("quick", **parse_overrides(["classifier.epochs=1e9"]))
    trained = get_preset("quick", **parse_overrides(["classifier.epochs=1e9", "allow_large=true"]))
    assert trained.classifier["epochs"] == 10**9
    assert "allow_large" not in preset.config()  # the override changes no number


def test_vision_training_work_counts_the_whole_epochs_training_runs():
    """train_classifier runs max(epochs, ceil(min_steps / steps_per_epoch)) whole epochs; the tiny
    preset (3,500 embedded images, batch 64, epochs 1, min_steps 60) runs 2, three passes an image;
    a label-only run trains a surrogate even without distillation queries."""
    from scarce.applications.vision.limits import estimate_resources
    from scarce.applications.vision.protocol import get_preset

    parts = estimate_resources(get_preset("tiny"))["training_parts"]
    assert list(parts.values()) == [3 * 2 * 3500, 0]
    labels_only = estimate_resources(get_preset("tiny", access="labels", surrogate_queries=0))["training_parts"]
    assert list(labels_only.values()) == [3 * 2 * 3500, 3 * 2 * 3500]

def test_vision_numpy_scalar_settings_become_python_numbers():
    from scarce.applications.vision.protocol import get_preset

    preset = get_preset("tiny", n_eval=np.int64(2), methods={"smc_samples": np.int16(500)},
                        classifier={"epochs": np.int64(1)})
    config = preset.config()
    assert type(config["n_eval"]) is int and type(config["methods"]["smc_samples"]) is int
    assert type(config["classifier"]["epochs"]) is int
    json.dumps(config)
    with pytest.raises(ScarceError, match=r"n_eval must be an integer >= 1, got 2.0"):
        get_preset("tiny", n_eval=2.0)
    with pytest.raises(ScarceError, match="unknown preset setting 'n_evals'"):
        get_preset("tiny", n_evals=2)


def test_vision_empty_run_dir_is_refused_and_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["vision", "--preset", "tiny", "--executor", "serial", "--run-dir", ""])
    assert result.exit_code == 2 and "non-empty path" in result.output
    assert list(tmp_path.iterdir()) == []


def test_vision_run_dir_that_is_a_file_or_too_long_is_a_clear_error(tmp_path):
    (tmp_path / "file").write_text("x")
    for run_dir in (tmp_path / "file", tmp_path / ("y" * 256)):
        result = runner.invoke(app, ["vision", "--preset", "tiny", "--executor", "serial", "--run-dir", str(run_dir)])
        assert result.exit_code == 2, result.output
        assert result.output.startswith("error: ") and "Traceback" not in result.output


def test_vision_read_only_run_dir_is_a_clear_error(tmp_path, monkeypatch):
    _fail_writes(monkeypatch, errno.EROFS)
    result = _vision([], tmp_path)
    assert result.exit_code == 2
    assert "cannot write" in result.output and "Read-only file system" in result.output


def test_a_run_directory_error_reaching_the_command_line_keeps_its_own_message():
    """A report stage's write error reaches the command line's ``except OSError`` first: it must not
    read "(RunDirectoryError)" in place of the original error's type."""
    from scarce.cli.common import describe_os_error
    from scarce.experiments.store import _os_error

    error = _os_error("write", Path("/run/report/rows.parquet"), OSError(errno.EROFS, os.strerror(errno.EROFS)))
    message = describe_os_error(error)
    assert message == str(error) and "RunDirectoryError" not in message
    assert message.startswith("cannot write '/run/report/rows.parquet': Read-only file system (OSError)")
    plain = describe_os_error(PermissionError(errno.EACCES, os.strerror(errno.EACCES), "/run/x"))
    assert plain.startswith("cannot access '/run/x': Permission denied (PermissionError); check that the run directory")


def test_harvest_saves_use_unique_temporary_names(tmp_path):
    pytest.importorskip("torch")
    from scarce.applications.vision.offline import HarvestedData
    from scarce.applications.vision.pipeline import _load_harvest, _save_harvest

    rng = np.random.default_rng(0)
    data = HarvestedData(rng.random((50, 12)), rng.random(50) < 0.3, rng.integers(0, 4, 50))
    path = tmp_path / "harvest.npz"
    (tmp_path / "harvest.tmp.npz").mkdir()  # the old fixed temporary name, taken by another run
    errors = []

    def save():
        try:
            for _ in range(5):
                _save_harvest(path, data)
        except Exception as error:  # noqa: BLE001 - collected and asserted below
            errors.append(error)

    threads = [threading.Thread(target=save) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    loaded = _load_harvest(path)
    np.testing.assert_array_equal(loaded.features, data.features)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["harvest.npz", "harvest.tmp.npz"]
    path.write_bytes(b"not a zip file")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert _load_harvest(path) is None
    assert "unreadable" in str(caught[0].message)


# -- the top-level CLI ---------------------------------------------------------------------------
@pytest.mark.parametrize(("option", "value", "message"), [
    ("--confidence", "2", r"--confidence must be in \(0, 1\), got 2"),
    ("--delta", "0", r"--delta must be in \(0, 1\), got 0"),
    ("--confidence", "nan", "--confidence must be a finite number"),
])
def test_estimate_report_options_are_checked_before_the_run(option, value, message):
    result = runner.invoke(app, ["estimate", "--n-samples", "100000", option, value])
    assert result.exit_code == 2
    assert __import__("re").search(message, result.output) and "P_f estimate" not in result.output


def test_estimate_k_nan_is_a_clear_error():
    result = runner.invoke(app, ["estimate", "--problem", "four_branch", "--k", "nan"])
    assert result.exit_code == 2
    assert "k must be a finite number" in result.output


# -- the MNIST readers ---------------------------------------------------------------------------
def _peak_bytes(fn) -> int:
    tracemalloc.start()
    try:
        fn()
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak


def test_gzip_bomb_behind_a_small_header_is_refused_without_decompressing(tmp_path):
    header = bytes([0, 0, 8, 1]) + (10).to_bytes(4, "big")
    path = tmp_path / "train-labels-idx1-ubyte.gz"
    path.write_bytes(gzip.compress(header + bytes(10) + bytes(60 << 20), mtime=0))
    assert path.stat().st_size < 200_000

    def read():
        # decompression stops one byte after the declared data
        with pytest.raises(ScarceError, match="extra bytes"):
            read_idx(path)

    assert _peak_bytes(read) < 4 << 20
    # the same with a forged gzip trailer (the trailer is not trusted either way)
    data = bytearray(path.read_bytes())
    data[-4:] = (len(header) + 10).to_bytes(4, "little")
    path.write_bytes(bytes(data))

    def read_forged():
        with pytest.raises(ScarceError, match="extra bytes"):
            read_idx(path)

    assert _peak_bytes(read_forged) < 4 << 20


def test_gzip_header_declaring_more_than_deflate_can_produce_is_refused(tmp_path):
    # 500 MB declared (under MAX_IDX_BYTES) in a file of a few hundred bytes: beyond deflate's ratio
    header = bytes([0, 0, 8, 3]) + b"".join(n.to_bytes(4, "big") for n in (500_000, 1000, 1))
    path = tmp_path / "train-images-idx3-ubyte.gz"
    path.write_bytes(gzip.compress(header + bytes(1000), mtime=0))

    def read():
        with pytest.raises(ScarceError, match="corrupt gzip.*more than deflate can produce"):
            read_idx(path)

    assert _peak_bytes(read) < 4 << 20


def test_zero_padded_gzip_idx_is_read(tmp_path):
    array = np.arange(60, dtype=np.uint8).reshape(5, 3, 4)
    path = write_idx(tmp_path / "padded.gz", array, compress=True)
    path.write_bytes(path.read_bytes() + bytes(16))   # tape and block devices pad gzip files with zeros
    np.testing.assert_array_equal(read_idx(path), array)


def test_multi_member_gzip_idx_is_read(tmp_path):
    # `cat a.gz b.gz`: the last trailer holds only the last member's size, not the whole file's
    array = np.arange(600, dtype=np.int16).reshape(20, 30)
    raw = write_idx(tmp_path / "raw", array).read_bytes()
    path = tmp_path / "multi.gz"
    path.write_bytes(gzip.compress(raw[:100], mtime=0) + gzip.compress(raw[100:], mtime=0))
    np.testing.assert_array_equal(read_idx(path), array)
    assert int.from_bytes(path.read_bytes()[-4:], "little") != len(raw)


def test_idx_header_beyond_the_size_limit_is_refused_before_reading(tmp_path):
    path = tmp_path / "huge"
    path.write_bytes(bytes([0, 0, 8, 3]) + b"".join(n.to_bytes(4, "big") for n in (1 << 20, 2048, 2048)))
    with pytest.raises(ScarceError, match="above the limit of"):
        read_idx(path)


def test_sparse_20gb_file_named_as_mnist_is_not_read_whole(tmp_path):
    header = bytes([0, 0, 8, 3]) + b"".join(n.to_bytes(4, "big") for n in (60000, 28, 28))
    for content in (header, b""):
        path = tmp_path / "train-images-idx3-ubyte"
        with open(path, "wb") as handle:
            handle.write(content)
            try:
                handle.truncate(20 << 30)
            except OSError:
                pytest.skip("the file system has no sparse files")
        start = time.perf_counter()
        with pytest.raises(ScarceError, match="extra bytes|type code 0x00"):
            _peak_bytes(lambda: mnist._load_file(path, "train-images-idx3-ubyte", verify=True))
        assert time.perf_counter() - start < 2
        path.unlink()


def test_idx_round_trip_still_reads_raw_and_gzip(tmp_path):
    array = np.arange(24, dtype=np.int16).reshape(2, 3, 4)
    for compress in (False, True):
        path = write_idx(tmp_path / f"a{compress}", array, compress=compress)
        np.testing.assert_array_equal(read_idx(path), array)


def test_atomic_write_of_a_name_near_the_length_limit_succeeds(tmp_path):
    from scarce._atomic import atomic_write_text

    path = tmp_path / ("n" * 250)
    atomic_write_text(path, "ok")
    assert path.read_text() == "ok" and [p.name for p in tmp_path.iterdir()] == [path.name]


def test_idx_empty_dimension_beside_huge_ones_is_a_clean_error(tmp_path):
    # found by the property suite: 0 x 3 x 1.7e9 x 1.7e9 holds no data, yet numpy cannot shape it
    path = tmp_path / "empty"
    path.write_bytes(b"\x00\x00\x08\x04" + b"".join(n.to_bytes(4, "big") for n in (0, 3, 0x68827500, 0x68837681)))
    with pytest.raises(ScarceError, match="above the limit"):
        read_idx(path)
    path.write_bytes(b"\x00\x00\x08\x03" + b"".join(n.to_bytes(4, "big") for n in (0, 28, 28)))
    assert read_idx(path).shape == (0, 28, 28)


def test_chunked_monte_carlo_refuses_a_random_oracle_without_identity_and_resumes_with_one(tmp_path):
    from scarce.experiments.montecarlo import ChunkedMonteCarlo

    oracle = np.random.default_rng(0)
    problem = RareEventProblem(2, lambda x: (np.zeros(len(x)), oracle.random(len(x)) < 1e-2))
    with pytest.raises(ScarceError, match="answered differently on two calls.*identity="):
        ChunkedMonteCarlo(n_samples=2000, chunk_size=1000).estimate(problem, seed=0, checkpoint_dir=tmp_path / "a")
    first = ChunkedMonteCarlo(n_samples=2000, chunk_size=1000).estimate(
        problem, seed=0, checkpoint_dir=tmp_path / "b", identity="oracle-v1")
    more = ChunkedMonteCarlo(n_samples=4000, chunk_size=1000).estimate(
        problem, seed=0, checkpoint_dir=tmp_path / "b", identity="oracle-v1")
    assert first.n_samples == 2000 and more.n_samples == 4000
    with pytest.raises(ScarceError, match="identity must be a non-empty string"):
        ChunkedMonteCarlo(n_samples=2000).estimate(problem, seed=0, checkpoint_dir=tmp_path / "c", identity="")
