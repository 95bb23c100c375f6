"""Hostile-input audit (issue 18) of the data readers and the embedding cache.

Each test pins a problem the audit found: a foreign exception (TypeError, UnicodeEncodeError,
OverflowError, OSError...), a hang (a named pipe read as a file), unbounded work or memory (a
device read as a shard, gzip padding or empty members read byte by byte) or a silently wrong
result (a key named twice, a container written with ``str``, a bare string taken as its
characters, the current directory used for an empty path). The properties draw from inputs that
hit those problems often; every call succeeds with checked output or raises :class:`ScarceError`.

Examples per property: ``SCARCE_HYPOTHESIS_EXAMPLES`` (default 20); derandomised, so a run is
reproducible. Pipes and devices are read in a subprocess with a time and memory limit, so a
regression fails the test instead of hanging or exhausting the machine.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
import textwrap
import time
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pd = pytest.importorskip("pandas")

from scarce.datasets import load_jailbreakbench_corpus, read_attack_artifact, read_behaviors  # noqa: E402
from scarce.datasets.garak import read_garak  # noqa: E402
from scarce.datasets.harmbench import read_harmbench  # noqa: E402
from scarce.datasets.jailbreakbench import find_artifact_files, read_attack_artifacts  # noqa: E402
from scarce.datasets.labelled import read_labelled  # noqa: E402
from scarce.datasets.mnist import load_mnist, read_idx, write_idx  # noqa: E402
from conftest import clean  # noqa: E402
from scarce.encoders.cache import EmbeddingCache, cached_encode  # noqa: E402
from scarce.errors import ScarceError, ScarceWarning  # noqa: E402

EXAMPLES = int(os.environ.get("SCARCE_HYPOTHESIS_EXAMPLES", "20"))
hostile = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                   suppress_health_check=list(HealthCheck))
TEXT_COLUMNS = ("record_id", "behavior_id", "method", "target_model", "prompt", "response", "category")
GOOD = {"prompt": "p", "response": "r", "label": 1}


def texts_are_real(frame):
    """Every text column holds strings UTF-8 can encode (what embedding and Parquet need)."""
    for column in TEXT_COLUMNS:
        for value in frame[column]:
            assert isinstance(value, str), (column, value)
            value.encode("utf-8")


def run_isolated(code, timeout=60):
    """Run ``code`` in a fresh interpreter limited to 2 GiB of address space; its stdout, or a
    failure when it hangs past ``timeout`` seconds or fails."""
    prelude = "import resource; resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))\n"
    try:
        out = subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)], capture_output=True,
                             text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"no answer within {timeout} s (the reader blocked)")
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def write_lines(path, objects):
    path.write_bytes(b"\n".join(o if isinstance(o, bytes) else json.dumps(o).encode() for o in objects))
    return path


def attempt(**changes):
    entry = {"entry_type": "attempt", "uuid": "u", "status": 2, "probe_classname": "dan.Dan", "prompt": "p",
             "outputs": ["o"], "detector_results": {"d": [0.9]}}
    return {**entry, **changes}


def fake_mnist(directory, n_train=12, n_test=12, train_dtype=np.uint8):
    directory.mkdir(exist_ok=True)
    write_idx(directory / "train-images-idx3-ubyte", np.zeros((n_train, 28, 28), dtype=train_dtype))
    write_idx(directory / "train-labels-idx1-ubyte", (np.arange(n_train) % 10).astype(np.uint8))
    write_idx(directory / "t10k-images-idx3-ubyte", np.zeros((n_test, 28, 28), dtype=np.uint8))
    write_idx(directory / "t10k-labels-idx1-ubyte", (np.arange(n_test) % 10).astype(np.uint8))
    return directory


# ------------------------------------------------------------------ path and option arguments

READERS = {
    "read_labelled": read_labelled, "read_garak": read_garak, "read_harmbench": read_harmbench,
    "read_attack_artifact": read_attack_artifact, "read_attack_artifacts": read_attack_artifacts,
    "find_artifact_files": find_artifact_files, "read_behaviors": lambda p: read_behaviors(p, harmful=True),
    "read_idx": read_idx, "load_jailbreakbench_corpus": load_jailbreakbench_corpus,
}


@pytest.mark.parametrize("reader", sorted(READERS))
def test_path_arguments_that_are_no_path_are_named(reader):
    for value, message in ((5, r"must be a path \(a str or os.PathLike\), got 5 \(int\)"),
                           (["a.json"], r"must be a path .*\(list\)"),
                           ("a\0b.json", "must not contain a NUL byte"),
                           ("x" * 300, "cannot be read|does not exist|no JailbreakBench data|is not a directory"),
                           ("", "must be a non-empty path")):
        with pytest.raises(ScarceError, match=message):
            READERS[reader](value)


def test_empty_mnist_data_dir_is_refused_not_read_from_the_current_directory(tmp_path, monkeypatch):
    fake_mnist(tmp_path)
    monkeypatch.chdir(tmp_path)
    for value in ("", "mnist:"):
        with pytest.raises(ScarceError, match=r"data_dir must be a non-empty path, got ''"):
            load_mnist(value, verify=False, seed_pool_size=2)


def test_empty_cache_dir_is_refused_not_the_current_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ScarceError, match=r"cache_dir must be a non-empty path, got ''"):
        EmbeddingCache("", "model")
    with pytest.raises(ScarceError, match="cache_dir must not contain a NUL byte"):
        EmbeddingCache("a\0b", "model")
    assert list(tmp_path.iterdir()) == []


def test_reader_options_of_the_wrong_type_are_refused(tmp_path):
    harmbench = tmp_path / "m.json"
    harmbench.write_text(json.dumps({"b": [{"test_case": "t", "generation": "g", "label": 1}]}))
    garak = write_lines(tmp_path / "r.jsonl", [attempt()])
    artifact = tmp_path / "attack-artifacts" / "PAIR" / "black_box" / "m.json"
    artifact.parent.mkdir(parents=True)
    artifact.write_text(json.dumps({"jailbreaks": [{"index": 0, "prompt": "p", "jailbroken": True}]}))
    (tmp_path / "behaviors").mkdir()
    behaviours = tmp_path / "behaviors" / "benign-behaviors.csv"
    behaviours.write_text("index,goal\n0,g\n")
    for call, message in (
            (lambda: read_behaviors(behaviours, harmful="no"), r"harmful must be True or False, got 'no'"),
            (lambda: load_jailbreakbench_corpus(tmp_path, include_benign="no"), "include_benign must be True or False"),
            (lambda: read_harmbench(harmbench, method=None), r"method must be a non-empty string, got None"),
            (lambda: read_harmbench(harmbench, target_model=5), "target_model must be a non-empty string or None"),
            (lambda: read_harmbench(harmbench, target_model="\ud800"), "target_model is not valid Unicode"),
            (lambda: read_garak(garak, target_model={"a": 1}), "target_model must be a non-empty string or None"),
            (lambda: read_attack_artifact(artifact, method=5), "method must be a non-empty string or None"),
            (lambda: read_attack_artifact(artifact, attack_type=""), "attack_type must be a non-empty string")):
        with pytest.raises(ScarceError, match=message):
            call()


# ------------------------------------------------------------------ JSON text of the corpus readers

def test_lone_surrogate_escapes_are_refused_naming_the_file(tmp_path):
    lone = '"\\ud800"'
    labelled = tmp_path / "c.jsonl"
    labelled.write_text('{"prompt": ' + lone + ', "response": "r", "label": 1}\n')
    garak = tmp_path / "r.jsonl"
    garak.write_text(json.dumps(attempt()).replace('"o"', lone) + "\n")
    harmbench = tmp_path / "m.json"
    harmbench.write_text('{"b": [{"test_case": ' + lone + ', "generation": "g", "label": 1}]}')
    artifact = tmp_path / "a.json"
    artifact.write_text('{"jailbreaks": [{"index": 0, "prompt": ' + lone + ', "jailbroken": true}]}')
    for call, path in ((read_labelled, labelled), (read_garak, garak), (read_harmbench, harmbench),
                       (read_attack_artifact, artifact)):
        with pytest.raises(ScarceError, match=re.escape(str(path)) + ".*not valid Unicode"):
            call(path)


def test_a_key_named_twice_in_one_object_is_refused(tmp_path):
    harmbench = tmp_path / "m.json"
    entry = '[{"test_case": "t", "generation": "g", "label": 1}]'
    harmbench.write_text('{"b": ' + entry + ', "b": ' + entry + "}")
    with pytest.raises(ScarceError, match=r"key 'b' appears twice in one object"):
        read_harmbench(harmbench)
    labelled = tmp_path / "c.jsonl"
    labelled.write_text('{"prompt": "p", "response": "r", "label": 1, "label": 0}\n')
    with pytest.raises(ScarceError, match=r"line 1: key 'label' appears twice"):
        read_labelled(labelled)


def test_integers_beyond_float_range_are_refused_as_scores(tmp_path):
    huge = "1" + "0" * 400
    labelled = tmp_path / "c.jsonl"
    labelled.write_text('{"prompt": "p", "response": "r", "label": 1, "judge_score": ' + huge + "}\n")
    with pytest.raises(ScarceError, match=r"line 1: judge_score must be a probability in \[0, 1\]"):
        read_labelled(labelled)
    garak = tmp_path / "r.jsonl"
    garak.write_text(json.dumps(attempt()).replace("0.9", huge) + "\n")
    with pytest.raises(ScarceError, match=r"scored output 0 .*outside \[0, 1\]"):
        read_garak(garak)


@pytest.mark.parametrize("column, value", [("method", {"a": 1}), ("record_id", [1]), ("target_model", 3.5),
                                           ("category", ["x"]), ("behavior_id", True)])
def test_labelled_text_columns_of_another_type_are_refused_not_stringified(tmp_path, column, value):
    path = write_lines(tmp_path / "c.jsonl", [{**GOOD, column: value}])
    with pytest.raises(ScarceError, match=rf"line 1: '{column}' must be a string"):
        read_labelled(path)


def test_labelled_numeric_record_ids_are_kept(tmp_path):
    frame = read_labelled(write_lines(tmp_path / "c.jsonl", [{**GOOD, "record_id": 0}, {**GOOD, "record_id": 7}]))
    assert frame["record_id"].tolist() == ["0", "7"]


@pytest.mark.parametrize("changes, message", [
    ({"prompt": {"turns": 5}}, r"'turns' must be a list of objects"),
    ({"prompt": {"turns": ["hello"]}}, r"'turns' must be a list of objects"),
    ({"outputs": "abc", "detector_results": {"d": [0.9, 0.9, 0.9]}}, r"'outputs' must be a list"),
    ({"outputs": 5}, r"'outputs' must be a list"),
    ({"detector_results": {"d": [0.9], "e": 0.7}}, r"detector_results: 'e' must be a list"),
    ({"probe_classname": {"a": 1}}, r"'probe_classname' must be a string"),
])
def test_garak_fields_of_another_shape_are_refused(tmp_path, changes, message):
    with pytest.raises(ScarceError, match=r"line 1\b.*" + message):
        read_garak(write_lines(tmp_path / "r.jsonl", [attempt(**changes)]))


def test_garak_target_in_the_setup_entry_must_be_a_string(tmp_path):
    path = write_lines(tmp_path / "r.jsonl", [{"entry_type": "start_run setup", "plugins.target_name": ["m"]},
                                              attempt()])
    with pytest.raises(ScarceError, match=r"line 1: plugins.target_name must be a string"):
        read_garak(path)


def test_harmbench_with_no_labelled_completion_is_refused(tmp_path):
    path = tmp_path / "m.json"
    for data, options in (({"b": []}, {}), ({"b": [{"test_case": "t", "generation": "g", "label": -1}]},
                                             {"unlabelled": "drop"})):
        path.write_text(json.dumps(data))
        with pytest.raises(ScarceError, match="holds no labelled completion"):
            read_harmbench(path, **options)


@pytest.mark.skipif(not os.path.exists("/proc/self/mem"), reason="needs /proc/self/mem (a file that fails to read)")
def test_a_corpus_file_that_fails_to_read_is_a_clean_error(tmp_path):
    for name, reader in (("r.jsonl", read_garak), ("c.jsonl", read_labelled), ("c.csv", read_labelled)):
        link = tmp_path / name
        link.symlink_to("/proc/self/mem")  # a regular file whose first page cannot be read
        with pytest.raises(ScarceError, match=re.escape(repr(str(link))) + " cannot be read"):
            reader(link)
        link.unlink()


# ------------------------------------------------------------------ property: the JSON corpus readers

HOSTILE_VALUES = st.sampled_from(["\ud800", "\udfff", 10**400, -(10**400), {"a": 1}, [1, 2], 3.5, True, None, "",
                                  "yes", "x", 0.5, float("nan")])
LABELLED_COLUMNS = ("prompt", "response", "label", "method", "target_model", "record_id", "behavior_id",
                    "judge_score", "category")


@st.composite
def labelled_lines(draw):
    record = dict(GOOD)
    for column in draw(st.lists(st.sampled_from(LABELLED_COLUMNS), min_size=1, max_size=3, unique=True)):
        record[column] = draw(HOSTILE_VALUES)
    line = json.dumps(record).encode()
    return line[:-1] + b', "label": 0}' if draw(st.integers(0, 4)) == 0 else line


@hostile
@given(st.lists(labelled_lines(), min_size=1, max_size=3))
def test_labelled_jsonl_reader_is_clean_on_hostile_values(tmp_path_factory, lines):
    path = tmp_path_factory.mktemp("labelled") / "c.jsonl"
    path.write_bytes(b"\n".join(lines))
    frame = clean(read_labelled, path, unlabelled="drop")
    if frame is not None:
        texts_are_real(frame)
        for column in ("method", "target_model", "category", "record_id"):
            assert not any(v.startswith(("{", "[")) for v in frame[column]), frame[column].tolist()
        assert frame["judge_score"].map(lambda s: s != s or 0 <= s <= 1).all()


GARAK_FIELDS = {"prompt": st.sampled_from(["p", {"turns": 5}, {"turns": ["x"]}, {"turns": [{"content": "\ud800"}]}]),
                "outputs": st.sampled_from([["o"], "abc", 5, {"o": 1}, ["\udc00"]]),
                "detector_results": st.sampled_from([{"d": [0.9]}, {"d": [0.9], "e": 0.5}, {"d": [10**400]}]),
                "probe_classname": st.sampled_from(["dan.Dan", {"a": 1}, 5])}


@hostile
@given(st.fixed_dictionaries({}, optional=GARAK_FIELDS))
def test_garak_reader_is_clean_on_hostile_fields(tmp_path_factory, changes):
    path = write_lines(tmp_path_factory.mktemp("garak") / "r.jsonl", [attempt(**changes)])
    frame = clean(read_garak, path)
    if frame is not None:
        texts_are_real(frame)
        assert len(frame) == 1 and frame["response"].tolist() == ["o"]


# ------------------------------------------------------------------ MNIST IDX files

def test_idx_reader_on_a_missing_file_is_a_scarce_error(tmp_path):
    with pytest.raises(ScarceError, match=r"IDX file .*missing.* does not exist"):
        read_idx(tmp_path / "missing")


def test_idx_reader_refuses_a_named_pipe_or_a_device_without_blocking(tmp_path):
    pipe = tmp_path / "train-images-idx3-ubyte"
    os.mkfifo(pipe)
    out = run_isolated(f"""
        from scarce.datasets.mnist import read_idx
        from scarce.errors import ScarceError
        for path in ({str(pipe)!r}, "/dev/zero"):
            try:
                read_idx(path)
            except ScarceError as exc:
                print(exc)
        """, timeout=30)
    assert out.count("is not a regular file") == 2, out


def _gzip_idx(payload_size):
    header = bytes([0, 0, 8, 1]) + payload_size.to_bytes(4, "big")
    return gzip.compress(header + bytes(payload_size), mtime=0)


def test_gzip_with_far_more_zero_padding_than_content_is_refused_before_reading(tmp_path):
    path = tmp_path / "labels.gz"
    data = _gzip_idx(3)
    with open(path, "wb") as handle:  # sparse: 20 MB of padding that Python's gzip reads byte by byte
        handle.write(data)
        handle.truncate(len(data) + (20 << 20))
    start = time.perf_counter()
    with pytest.raises(ScarceError, match="more than deflate needs for the 11 bytes its IDX header declares"):
        read_idx(path)
    assert time.perf_counter() - start < 1.0
    path.write_bytes(data + bytes(4096))  # tape-block padding is still read
    np.testing.assert_array_equal(read_idx(path), np.zeros(3, dtype=np.uint8))


def test_gzip_flood_of_empty_members_is_refused(tmp_path):
    path = tmp_path / "labels.gz"
    path.write_bytes(_gzip_idx(1 << 20) + gzip.compress(b"", mtime=0) * 20_000)
    with pytest.raises(ScarceError, match=r"more than \d+ gzip members"):
        read_idx(path)


def test_float_training_images_with_no_digit_are_a_clean_error(tmp_path):
    fake_mnist(tmp_path, n_train=0, train_dtype=np.float32)
    with pytest.raises(ScarceError, match="train-images-idx3-ubyte holds 0 images"):
        load_mnist(tmp_path, verify=False, seed_pool_size=2)


def test_empty_training_split_is_refused(tmp_path):
    fake_mnist(tmp_path, n_train=0)
    with pytest.raises(ScarceError, match="holds 0 images; the training split needs at least 1"):
        load_mnist(tmp_path, verify=False, seed_pool_size=2)


# ------------------------------------------------------------------ the embedding cache

def test_a_shard_that_is_a_pipe_or_a_device_is_set_aside_without_reading(tmp_path):
    out = run_isolated(f"""
        import os, warnings
        import numpy as np
        from scarce.encoders.cache import EmbeddingCache
        cache = EmbeddingCache({str(tmp_path)!r}, "model")
        for special in ("pipe", "device"):
            shard = cache.store(["a"], {{"embedding": np.ones((1, 2), dtype=np.float32)}})
            shard.unlink()
            os.mkfifo(shard) if special == "pipe" else os.symlink("/dev/zero", shard)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                found, _ = EmbeddingCache({str(tmp_path)!r}, "model").lookup(["a"])
            print(special, found.tolist(), [str(w.message) for w in caught])
        """, timeout=30)
    assert out.count("not a regular file") == 2 and "True" not in out, out


def test_cache_texts_must_be_strings_of_valid_unicode(tmp_path):
    cache = EmbeddingCache(tmp_path, "model")
    for texts, message in ((["a", 1], r"texts\[1\] must be a str, got 1 \(int\)"),
                           (["\udc80"], r"texts\[0\] is not valid Unicode text"),
                           ("abc", r"texts must be a sequence of strings .*got 'abc' \(str\)")):
        with pytest.raises(ScarceError, match=message):
            cache.lookup(texts)
        with pytest.raises(ScarceError, match=message):
            cache.store(texts, {"embedding": np.ones((len(texts), 2))})
    with pytest.raises(ScarceError, match="identity is not valid Unicode text"):
        EmbeddingCache(tmp_path, "model-\ud800")


def test_field_names_np_savez_would_take_as_its_own_arguments_round_trip(tmp_path):
    values = {"file": np.arange(4.0).reshape(2, 2), "allow_pickle": np.array([1, 2])}
    EmbeddingCache(tmp_path, "model").store(["a", "b"], values)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ScarceWarning)
        found, got = EmbeddingCache(tmp_path, "model").lookup(["b", "a"])
    assert found.tolist() == [True, True]
    np.testing.assert_array_equal(got["file"], values["file"][::-1])
    np.testing.assert_array_equal(got["allow_pickle"], values["allow_pickle"][::-1])


@pytest.mark.parametrize("arrays, message", [
    ({3: np.ones(1)}, r"a field name must be a string .*got 3"),
    ({"e": [[1, 2], [3]]}, r"cached field 'e' is not an array"),
])
def test_store_refuses_field_names_and_values_that_are_no_fields(tmp_path, arrays, message):
    with pytest.raises(ScarceError, match=message):
        EmbeddingCache(tmp_path, "model").store(["a"], arrays)


ENCODER_OUTPUTS = {
    "a list": lambda n: [1.0] * n,
    "no field": lambda n: {},
    "a ragged field": lambda n: {"e": [[1.0, 2.0]] + [[1.0]] * (n - 1)},
    "objects": lambda n: {"e": np.array([{"a": 1}] * n, dtype=object)},
    "complex numbers": lambda n: {"e": np.ones(n, dtype=complex)},
    "a reserved name": lambda n: {"keys": np.ones(n)},
    "an integer name": lambda n: {1: np.ones(n)},
}


@hostile
@given(st.sampled_from(sorted(ENCODER_OUTPUTS)), st.booleans(),
       st.lists(st.sampled_from(["a", "b", "c", "d"]), min_size=2, max_size=4, unique=True))
def test_cached_encode_refuses_encoder_output_that_is_no_fields(tmp_path_factory, output, with_cache, texts):
    cache = EmbeddingCache(tmp_path_factory.mktemp("cache"), "model") if with_cache else None
    with pytest.raises(ScarceError, match="the encoder's (output|field)"):
        cached_encode(texts, lambda batch: ENCODER_OUTPUTS[output](len(batch)), cache=cache, batch_size=4)


def test_cached_encode_refuses_a_bare_string_of_texts():
    with pytest.raises(ScarceError, match=r"texts must be a sequence of strings"):
        cached_encode("abc", lambda batch: {"e": np.ones((len(batch), 2))}, cache=None, batch_size=2)
