"""Property suite (issue 18): the LLM corpus readers, the embedding cache and ``scarce llm --set``
under generated hostile input: each call succeeds (with the right numbers) or raises a clean
:class:`ScarceError` / exits with a clean CLI error; never a foreign exception or a traceback.

Examples per test: ``SCARCE_HYPOTHESIS_EXAMPLES`` (default 25); seeded (``derandomize``).
"""

from __future__ import annotations

import io
import json
import os
import string
import warnings

import numpy as np
import pytest

pd = pytest.importorskip("pandas")
pytest.importorskip("pyarrow")
hypothesis = pytest.importorskip("hypothesis")

from hypothesis import HealthCheck, assume, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from conftest import clean, synthetic_corpus  # noqa: E402
from scarce.applications.llm.corpus import check_corpus, read_corpus, write_corpus  # noqa: E402
from scarce.applications.llm.embedding import embedding_matrix  # noqa: E402
from scarce.applications.llm.sweep import SweepConfig  # noqa: E402
from scarce.cli import app  # noqa: E402
from scarce.datasets import read_attack_artifact, read_behaviors  # noqa: E402
from scarce.encoders.cache import EmbeddingCache, shard_checksum  # noqa: E402
from scarce.errors import ScarceWarning  # noqa: E402

EXAMPLES = int(os.environ.get("SCARCE_HYPOTHESIS_EXAMPLES", "25"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                           HealthCheck.data_too_large])

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=True) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=8)
# A value for each corpus column: usually of the right type, sometimes anything at all.
COLUMNS = {
    "record_id": st.text(min_size=1, max_size=6) | st.integers(0, 99),
    "method": st.sampled_from(["PAIR", "GCG", "none"]),
    "target_model": st.sampled_from(["m", "none"]),
    "jailbroken": st.booleans() | st.sampled_from([0, 1]),
    "prompt": st.text(max_size=10),
    "turn": st.none() | st.integers(0, 5),
    "judge_score": st.none() | st.floats(0, 1),
    "embedding": st.lists(st.floats(-5, 5), min_size=2, max_size=2),
}


@st.composite
def records(draw):
    record = {}
    for column, good in COLUMNS.items():
        choice = draw(st.integers(0, 9))
        if choice == 0:
            continue  # column absent
        record[column] = draw(JSON) if choice == 1 else draw(good)
    extra = draw(st.dictionaries(st.text(max_size=4), JSON, max_size=2))
    return {**extra, **record}


LINE = (records().map(lambda r: json.dumps(r).encode())
        | JSON.map(lambda v: json.dumps(v).encode())
        | st.binary(max_size=60).map(lambda b: b.replace(b"\n", b" ")))


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("hostile_llm")


# ------------------------------------------------------------------------------ corpus readers

@SETTINGS
@given(lines=st.lists(LINE, min_size=1, max_size=5))
def test_jsonl_reader_is_clean(workdir, lines):
    path = workdir / "c.jsonl"
    path.write_bytes(b"\n".join(lines))
    frame = clean(read_corpus, path)
    if frame is not None:
        assert len(frame) == sum(1 for line in lines if line.strip())
        if "embedding" in frame.columns:
            clean(embedding_matrix, frame)


def _base_parquet(workdir):
    path = workdir / "base.parquet"
    if not path.exists():
        write_corpus(synthetic_corpus().iloc[:12].reset_index(drop=True), path)
    return path.read_bytes()


@SETTINGS
@given(flips=st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.integers(0, 255)), max_size=4),
       cut=st.none() | st.floats(0, 1), tail=st.just(b"") | st.binary(min_size=1, max_size=16))
@example(flips=[(0.833984375, 52)], cut=None, tail=b"")  # renamed 'embedding' in the pandas metadata, read silently
def test_damaged_parquet_is_refused_or_read_unchanged(workdir, flips, cut, tail):
    base = _base_parquet(workdir)
    data = bytearray(base)
    for where, value in flips:
        data[int(where * len(data))] = value
    if cut is not None:
        data = data[: int(cut * len(data))]
    data += tail
    path = workdir / "damaged.parquet"
    path.write_bytes(bytes(data))
    frame = clean(read_corpus, path)
    if frame is not None:  # read: then it must be the corpus that was written, not other numbers
        original = read_corpus(workdir / "base.parquet")
        assert frame["record_id"].tolist() == original["record_id"].tolist()
        assert frame["jailbroken"].tolist() == original["jailbroken"].tolist()
        np.testing.assert_array_equal(embedding_matrix(frame), embedding_matrix(original))


# One kind of value per column (what a Parquet column can hold), nulls now and then.
CELL_KINDS = [st.booleans(), st.integers(-3, 3), st.floats(allow_nan=True), st.text(max_size=4),
              st.lists(st.floats(-2, 2), max_size=3), st.lists(st.text(max_size=2), max_size=2)]
COLUMN = st.sampled_from(CELL_KINDS).flatmap(lambda kind: st.lists(kind | st.none(), min_size=2, max_size=2))


@SETTINGS
@given(columns=st.dictionaries(st.sampled_from(list(COLUMNS) + ["harmful", "response"]), COLUMN,
                               min_size=3, max_size=8))
def test_parquet_with_any_column_types_is_clean(workdir, columns):
    path = workdir / "typed.parquet"
    try:
        pd.DataFrame(columns).to_parquet(path)
    except Exception:  # noqa: BLE001 - pyarrow cannot write every mixture; such a case is not a test
        assume(False)
    frame = clean(read_corpus, path)
    if frame is not None:
        clean(check_corpus, frame, require_embedding=True)


@SETTINGS
@given(text=st.text(alphabet=string.printable + "\x00é", max_size=200), header=st.booleans())
def test_behaviours_csv_reader_is_clean(workdir, text, header):
    path = workdir / "behaviors.csv"
    path.write_text(("index,goal,target,behavior,category,source\n" if header else "") + text,
                    encoding="utf-8")
    clean(read_behaviors, path, harmful=False)


@SETTINGS
@given(data=JSON | st.fixed_dictionaries({"parameters": JSON, "jailbreaks": st.lists(
    st.fixed_dictionaries({}, optional={"index": JSON | st.integers(0, 3), "prompt": JSON,
                                        "response": JSON, "jailbroken": JSON | st.booleans(),
                                        "category": JSON}), max_size=4)}))
def test_artifact_reader_is_clean(workdir, data):
    path = workdir / "PAIR" / "black_box" / "m.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    clean(read_attack_artifact, path)


# ------------------------------------------------------------------------------ cache shards

TEXTS = ["a", "b", "c"]
STORED = np.arange(6, dtype=np.float32).reshape(3, 2)


def _fresh_cache(root):
    for path in root.rglob("shard-*"):
        path.unlink()
    cache = EmbeddingCache(root, "model-x")
    return cache, cache.store(TEXTS, {"embedding": STORED})


def _lookup(root):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ScarceWarning)
        return clean(lambda: EmbeddingCache(root, "model-x").lookup(TEXTS))


@SETTINGS
@given(flips=st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.integers(0, 255)), min_size=1, max_size=4),
       cut=st.none() | st.floats(0, 1))
def test_tampered_shard_bytes_never_supply_changed_numbers(workdir, flips, cut):
    root = workdir / "cache-bytes"
    _, shard = _fresh_cache(root)
    data = bytearray(shard.read_bytes())
    for where, value in flips:
        data[int(where * len(data))] = value
    if cut is not None:
        data = data[: int(cut * len(data))]
    shard.write_bytes(bytes(data))
    outcome = _lookup(root)
    if outcome is not None:
        found, values = outcome
        if found.any():  # only an unchanged shard (the flips wrote the bytes it had) is used
            assert found.all()
            np.testing.assert_array_equal(values["embedding"], STORED)


ARRAY = st.one_of(
    st.builds(lambda n, d, kind: np.zeros((n,) + ((d,) if d else ()), dtype=kind),
              st.integers(0, 4), st.integers(0, 3), st.sampled_from(["f4", "f8", "i4", "u1", "?", "U2", "S3"])),
    st.just(np.array(1.5)))
KEYS = st.one_of(
    st.lists(st.sampled_from(TEXTS + ["z"]), max_size=4).map(
        lambda ts: np.array([__import__("hashlib").sha256(t.encode()).hexdigest() for t in ts], dtype="S64")),
    st.lists(st.binary(max_size=64), max_size=3).map(lambda ks: np.array(ks, dtype="S64")),
    ARRAY)


@SETTINGS
@given(arrays=st.dictionaries(st.sampled_from(["embedding", "p_unsafe", "other"]), ARRAY, max_size=2),
       keys=KEYS, checksum=st.sampled_from(["right", "none", "wrong", "odd"]))
def test_malformed_shards_are_clean(workdir, arrays, keys, checksum):
    root = workdir / "cache-struct"
    _, shard = _fresh_cache(root)
    members = {"keys": keys, **arrays}
    extra = {"right": {"sha256": np.array(shard_checksum(members), dtype="S64")}, "none": {},
             "wrong": {"sha256": np.array(b"0" * 64, dtype="S64")}, "odd": {"sha256": np.arange(3)}}[checksum]
    buffer = io.BytesIO()
    np.savez(buffer, **members, **extra)
    shard.write_bytes(buffer.getvalue())
    outcome = _lookup(root)
    if outcome is not None and outcome[0].any():
        found, values = outcome
        assert checksum in ("right", "none")
        for value in values.values():
            assert value.shape[0] == len(TEXTS)


# ------------------------------------------------------------------------------ CLI --set

KEYS_ALLOWED = sorted(f for f in SweepConfig.__dataclass_fields__ if f != "name")
VALUE = (st.sampled_from(["nan", "inf", "-inf", "-1", "0", "1", "1e9", "1e18", "1e-3", "0.5", "75.5", "true",
                          "", "1e-3,0.001", "pc1,pc1", "1e400", "9" * 5000, "10,inf", "PAIR", "none"])
         | st.text(alphabet=string.printable, max_size=12))
runner = CliRunner()


@SETTINGS
@given(items=st.lists(st.tuples(st.sampled_from(KEYS_ALLOWED + ["n_run", "", "name"]), VALUE), max_size=3),
       preset=st.sampled_from(["tiny", "quick", "paper"]))
def test_sweep_set_parsing_gives_clean_errors(workdir, items, preset):
    args = ["llm", "sweep", "--preset", preset, "--run-dir", str(workdir / "run"),
            "--corpus", str(workdir / "missing.parquet"), "--executor", "serial", "--no-report"]
    for key, value in items:
        args += ["--set", f"{key}={value}"]
    result = runner.invoke(app, args)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    assert result.exit_code == 2, result.output
    assert "error:" in result.output and "Traceback" not in result.output, result.output
    assert not (workdir / "run").exists()
