"""Hostile input to the LLM application (issue 18, items 6-8): exact cell keys, failed sweeps exit
non-zero, settings validated before work, damaged corpora and cache shards, devices, outputs.

Every corpus is small and written in ``tmp_path``; no data files, no network, no model.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import warnings
import zipfile

import numpy as np
import pytest

pd = pytest.importorskip("pandas")
pytest.importorskip("pyarrow")
pytest.importorskip("sklearn")

from typer.testing import CliRunner  # noqa: E402

from conftest import synthetic_corpus  # noqa: E402
from scarce.applications.llm import corpus as corpus_module  # noqa: E402
from scarce.applications.llm import sweep as sweep_module  # noqa: E402
from scarce.applications.llm.analysis import cell_rows  # noqa: E402
from scarce.applications.llm.corpus import read_corpus, write_corpus  # noqa: E402
from scarce.applications.llm.embedding import embed_corpus, embedding_matrix  # noqa: E402
from scarce.applications.llm.sweep import LLMSweep, eta_text, get_preset, parse_overrides  # noqa: E402
from scarce.cli import app  # noqa: E402
from scarce.datasets import read_attack_artifact, read_behaviors  # noqa: E402
from scarce.encoders.cache import EmbeddingCache, read_shard, shard_checksum  # noqa: E402
from scarce.errors import ScarceError, ScarceWarning  # noqa: E402

runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, ["llm", *map(str, args)])


def key_eta(key):
    return float(key.rpartition("-eta")[2].rpartition("-N")[0])


# ------------------------------------------------------------------------------ item 6: cell keys

def test_etas_one_digit_apart_get_distinct_exact_cells(tmp_path, llm_corpus):
    config = get_preset("tiny", families=("pc1",), etas=(1.5e-3, 2e-3))
    tasks = LLMSweep(config, tmp_path / "run", corpus=llm_corpus).tasks()
    assert len(tasks) == 9  # 5 before: 1.5e-3 and 2e-3 shared the key "eta2e-03"
    for key, task in tasks.items():
        assert key_eta(key) == task["eta"]
    assert sorted(task["eta"] for task in tasks.values()) == [1e-3] + [1.5e-3] * 4 + [2e-3] * 4


def test_eta_text_round_trips_and_keeps_one_digit_keys():
    for eta in (1e-4, 1e-3, 5e-2, 0.1, 1.0, 1.5e-3, 0.1 + 0.2, 2e-3 + 1e-18, 1 / 3):
        assert float(eta_text(eta)) == eta
    assert eta_text(1e-3) == "1e-03" and eta_text(1.5e-3) == "1.5e-03"
    assert eta_text(1 / 3) != eta_text(0.3333333333333333 + 1e-16)


def test_the_same_eta_written_twice_is_refused_naming_both():
    with pytest.raises(ScarceError, match=r"etas holds the same value twice: 0.001 and 0.001"):
        get_preset("tiny", **parse_overrides(["etas=1e-3,0.001"], "tiny"))
    with pytest.raises(ScarceError, match="families holds the same value twice"):
        get_preset("tiny", families=("pc1", "pc1"))


def test_groups_that_share_a_key_are_refused_naming_both(tmp_path):
    corpus = synthetic_corpus()
    corpus["target_model"] = corpus["target_model"].replace({"model-a": "x~y", "model-b": "x/y"})
    sweep = LLMSweep(get_preset("tiny", transfer_method=""), tmp_path / "run", corpus=corpus)
    with pytest.raises(ScarceError, match=r"two cells share the key .*'PAIR/x/y'.*'PAIR/x~y'|"
                                          r"two cells share the key .*'PAIR/x~y'.*'PAIR/x/y'"):
        sweep.tasks()


def test_a_cell_stored_under_another_key_is_left_out_of_the_report():
    class Store:
        def timed_items(self):
            yield "cell-pc1_p75-G-eta2e-03-N300", {"kind": "cell", "stage": "main", "family": "pc1",
                                                   "percentile": 75, "group": "G", "eta": 1.5e-3,
                                                   "n_samples": 300}, {}

    with pytest.warns(ScarceWarning, match=r"holds the cell 'cell-pc1_p75-G-eta1.5e-03-N300'"):
        assert cell_rows(Store()).empty


# ------------------------------------------------------------------- item 6: failed sweeps, seeds

def test_sweep_with_failed_cells_exits_nonzero_and_says_where(tmp_path, llm_corpus, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("cascade broke")

    monkeypatch.setattr(sweep_module, "_cascade_runs", broken)
    corpus = write_corpus(llm_corpus, tmp_path / "corpus.parquet")
    run_dir = tmp_path / "run"
    result = invoke("sweep", "--corpus", corpus, "--run-dir", run_dir, "--preset", "tiny",
                    "--executor", "serial")
    assert result.exit_code == 1, result.output
    assert "0/26 cells finished, 26 failed" in result.output
    assert "26 of 26 cells failed" in result.output and str(run_dir / "errors") in result.output
    assert "RuntimeError: cascade broke" in result.output
    assert not (run_dir / "report").exists()


def test_negative_seed_is_refused_before_work(tmp_path):
    result = invoke("sweep", "--preset", "tiny", "--set", "seed=-1", "--run-dir", tmp_path / "run",
                    "--corpus", tmp_path / "missing.parquet")
    assert result.exit_code == 2, result.output
    assert "seed must be an integer >= 0; got -1" in result.output
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("setting, message", [
    ("ranking_min_eta=nan", r"ranking_min_eta takes a value like 0.001 \(a finite number\)"),
    ("ranking_min_eta=0", r"ranking_min_eta must lie in \(0, 1\]; got 0.0"),
    ("n_samples=1e9", r"n_samples must be an integer in \[10, 1,000,000\] \(pass allow_large=true"),
    ("n_runs=1e18", r"n_runs must be an integer in \[1, 10,000\]"),
    ("n_grid=10,inf", r"n_grid takes a value like 200,300 \(a comma-separated list of integers\)"),
    ("percentiles=75.5", r"percentiles takes a value like 75"),
    ("level_probability=inf", "level_probability takes a value like 0.1"),
    ("seed=0.5", "seed takes a value like 0 \\(an integer\\)"),
    ("etas=", "etas must each hold at least one value"),
    ("method=", "method must be a non-empty string"),
    ("head=maybe", "head takes a value like false"),
])
def test_sweep_settings_are_validated_before_work(tmp_path, setting, message):
    result = invoke("sweep", "--preset", "tiny", "--set", setting, "--run-dir", tmp_path / "run",
                    "--corpus", tmp_path / "missing.parquet")
    assert result.exit_code == 2, result.output
    assert re.search(message, result.output), result.output
    assert not (tmp_path / "run").exists()


def test_allow_large_lifts_the_bounds_and_stays_out_of_the_stored_config():
    with pytest.raises(ScarceError, match="samples per level per cell exceeds the bound"):
        get_preset("tiny", n_runs=1000, n_samples=100_000)
    config = get_preset("tiny", n_samples=2_000_000, allow_large=True)
    assert "allow_large" not in config.config() and config.config()["n_samples"] == 2_000_000


@pytest.mark.parametrize("name", ["", "   ", "\t"])
def test_empty_or_blank_run_dir_is_refused_naming_the_value(tmp_path, name):
    result = invoke("sweep", "--preset", "tiny", "--run-dir", name, "--corpus", tmp_path / "c.parquet")
    assert result.exit_code == 2, result.output
    assert f"--run-dir: run directory must be a non-empty path, got {name!r}" in result.output, result.output


# ------------------------------------------------------------------------- item 8: corpus readers

def jsonl(tmp_path, lines, name="c.jsonl"):
    path = tmp_path / name
    path.write_bytes(b"\n".join(line if isinstance(line, bytes) else line.encode() for line in lines))
    return path


GOOD = {"record_id": "r1", "method": "PAIR", "target_model": "m", "jailbroken": True,
        "prompt": "p", "embedding": [0.0, 1.0]}


@pytest.mark.parametrize("line, message", [
    (b'{"record_id": "r1", "prompt": "\xff\xfe"}', r"line 2: not UTF-8 text"),
    (b"[1, 2, 3]", r"line 2: expected a JSON object \(one record\), got a JSON list"),
    (b'{"record_id": "r2"', r"line 2: not a JSON object"),
    (b"[" * 100_000 + b"]" * 100_000, r"line 2: JSON nested too deeply"),
    (b'{"x": ' + b"9" * 5000 + b"}", r"line 2: not a JSON object"),
    (json.dumps({**GOOD, "record_id": "r2", "jailbroken": {"a": 1}}).encode(),
     r"line 2: jailbroken must be True/False \(or 1/0\), got \{'a': 1\} \(dict\)"),
    (json.dumps({**GOOD, "record_id": "r2", "prompt": ["a"]}).encode(), r"line 2: prompt must be a string or null"),
    (json.dumps({**GOOD, "record_id": "r2", "embedding": ["1", "2"]}).encode(),
     r"line 2: embedding must be a non-empty list of numbers"),
    (json.dumps({**GOOD, "record_id": "r2", "embedding": [[1], [2, 3]]}).encode(),
     r"line 2: embedding must be a list of numbers"),
    (json.dumps({**GOOD, "record_id": "r2", "turn": "three"}).encode(), r"line 2: turn must be an integer or null"),
])
def test_damaged_jsonl_names_the_file_and_line(tmp_path, line, message):
    path = jsonl(tmp_path, [json.dumps(GOOD), line])
    with pytest.raises(ScarceError, match=re.escape(str(path)) + ".*" + message):
        read_corpus(path)


def test_damaged_parquet_names_the_file(tmp_path, llm_corpus):
    path = write_corpus(llm_corpus, tmp_path / "c.parquet")
    data = bytearray(path.read_bytes())
    data[len(data) // 2: len(data) // 2 + 64] = b"\x00" * 64
    path.write_bytes(bytes(data))
    with pytest.raises(ScarceError, match=re.escape(str(path)) + ".*(not a readable Parquet|cannot be decoded)"):
        read_corpus(path)
    path.write_bytes(b"PAR1" + b"\x00" * 100)
    with pytest.raises(ScarceError, match="not a readable Parquet file"):
        read_corpus(path)


@pytest.mark.parametrize("column, values, message", [
    ("jailbroken", ["yes"] * 3, r"row 0 \(record_id 'a'\): jailbroken must be True/False"),
    ("record_id", [1.5, 2.5, 3.5], r"row 0: record_id must be a string or an integer"),
    ("method", [1, 2, 3], r"row 0 \(record_id 'a'\): method must be a string or null"),
    ("embedding", ["abc", "def", "ghi"], r"embedding of row 0 \(record_id 'a'\) must be a list of numbers"),
])
def test_parquet_with_wrong_column_types_names_the_row(tmp_path, column, values, message):
    frame = pd.DataFrame({"record_id": ["a", "b", "c"], "method": ["PAIR"] * 3, "target_model": ["m"] * 3,
                          "jailbroken": [True, False, True], "embedding": [[0.0, 1.0]] * 3})
    frame[column] = values
    path = tmp_path / "c.parquet"
    frame.to_parquet(path)
    with pytest.raises(ScarceError, match=message):
        embedding_matrix(read_corpus(path))


def test_oversized_corpus_files_and_lines_are_refused_before_reading(tmp_path, monkeypatch):
    path = jsonl(tmp_path, [json.dumps(GOOD), json.dumps({**GOOD, "record_id": "r2", "prompt": "x" * 500})])
    monkeypatch.setattr(corpus_module, "MAX_LINE_BYTES", 200)
    with pytest.raises(ScarceError, match=r"line 2: longer than 200 bytes"):
        read_corpus(path)
    monkeypatch.setattr(corpus_module, "MAX_CORPUS_BYTES", 100)
    with pytest.raises(ScarceError, match=r"is \d+ bytes, more than the 100 bytes .* it is not read"):
        read_corpus(path)
    sparse = tmp_path / "huge.parquet"
    with open(sparse, "wb") as handle:  # a sparse file: no disk used, far larger than the bound
        handle.truncate(1 << 20)
    with pytest.raises(ScarceError, match="more than the 100 bytes"):
        read_corpus(sparse)


def test_artifacts_and_behaviours_refuse_deep_nesting_wrong_types_and_size(tmp_path, monkeypatch):
    path = tmp_path / "PAIR" / "black_box" / "m.json"
    path.parent.mkdir(parents=True)
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ScarceError, match="nested too deeply"):
        read_attack_artifact(path)
    path.write_text(json.dumps({"jailbreaks": [{"index": 0, "prompt": {"x": 1}, "jailbroken": True}]}))
    with pytest.raises(ScarceError, match=r"entry 0: 'prompt' must be a string or null, got dict"):
        read_attack_artifact(path)
    path.write_text(json.dumps({"parameters": {"model": ["m"]}, "jailbreaks": []}))
    with pytest.raises(ScarceError, match="parameters.model must be a string"):
        read_attack_artifact(path)
    csv = tmp_path / "benign-behaviors.csv"
    csv.write_text("index,goal\n0,g\n")
    from scarce.datasets import jailbreakbench

    monkeypatch.setattr(jailbreakbench, "MAX_BEHAVIORS_BYTES", 5)
    with pytest.raises(ScarceError, match="more than the 5 bytes"):
        read_behaviors(csv, harmful=False)


# ------------------------------------------------------------------------- item 8: cache shards

def filled_cache(tmp_path):
    cache = EmbeddingCache(tmp_path, "model-x")
    shard = cache.store(["a", "b"], {"embedding": np.arange(4, dtype=np.float32).reshape(2, 2)})
    return cache, shard


def rewrite(shard, arrays, checksum=True):
    buffer = io.BytesIO()
    extra = {"sha256": np.array(shard_checksum(arrays), dtype="S64")} if checksum else {}
    np.savez(buffer, **arrays, **extra)
    shard.write_bytes(buffer.getvalue())


def reopened_lookup(tmp_path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        found, values = EmbeddingCache(tmp_path, "model-x").lookup(["a", "b"])
    return found, values, [str(w.message) for w in caught if issubclass(w.category, ScarceWarning)]


def test_changed_numbers_in_a_shard_are_detected_and_recomputed(tmp_path):
    _, shard = filled_cache(tmp_path)
    arrays = dict(np.load(shard))
    arrays["embedding"] = arrays["embedding"] + 1  # the stored checksum no longer matches
    np.savez(shard, **arrays)  # np.savez writes to the path as given
    found, values, messages = reopened_lookup(tmp_path)
    assert not found.any() and values == {}
    assert any("checksum does not match" in m for m in messages)
    assert (shard.parent / (shard.name + ".rejected")).is_file() and not shard.exists()


@pytest.mark.parametrize("damage, reason", [
    (lambda s, a: rewrite(s, {"keys": a["keys"], "embedding": a["embedding"][:1]}), "for 2 keys"),
    (lambda s, a: rewrite(s, {"keys": a["keys"], "embedding": a["embedding"][:1]}, checksum=False), "for 2 keys"),
    (lambda s, a: np.savez(s, keys=a["keys"], embedding=a["embedding"], sha256=np.array(b"0" * 64)),
     "checksum does not match"),
    (lambda s, a: np.savez(s, keys=a["keys"], embedding=a["embedding"], sha256=np.arange(3)),
     "checksum member is not a 64-digit hex digest"),
    (lambda s, a: rewrite(s, {"keys": a["keys"]}), "no field besides 'keys'"),
    (lambda s, a: s.write_bytes(s.read_bytes()[:100]), "not a readable NumPy archive"),
    (lambda s, a: rewrite(s, {"keys": np.array([b"x" * 64, b"y" * 64]), "embedding": a["embedding"]}),
     "not 64-digit hex"),
])
def test_malformed_shards_are_set_aside_with_a_warning(tmp_path, damage, reason):
    _, shard = filled_cache(tmp_path)
    damage(shard, dict(np.load(shard)))
    found, _, messages = reopened_lookup(tmp_path)
    assert not found.any()
    assert any(reason in m for m in messages), messages


def test_compressed_or_oversized_shards_are_refused_before_decompression(tmp_path, monkeypatch):
    _, shard = filled_cache(tmp_path)
    with zipfile.ZipFile(shard, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("embedding.npy", b"\x00" * 10_000_000)  # a 10 MB member in a few kB
    assert "compressed" in read_shard(shard)
    from scarce.encoders import cache as cache_module

    monkeypatch.setattr(cache_module, "MAX_SHARD_BYTES", 1000)
    assert "more than the 1,000" in read_shard(shard)


def test_a_shard_changed_after_opening_is_not_trusted(tmp_path):
    cache, shard = filled_cache(tmp_path)
    arrays = dict(np.load(shard))
    rewrite(shard, {"keys": arrays["keys"][::-1].copy(), "embedding": arrays["embedding"]})
    with pytest.warns(ScarceWarning, match="rows changed"):
        found, _ = cache.lookup(["a", "b"])
    assert not found.any()


def legacy_shard(directory, texts, embedding, name=None):
    """A shard as scarce wrote it before shards carried a checksum (``keys`` and the fields only)."""
    keys = np.array([hashlib.sha256(t.encode("utf-8")).hexdigest() for t in texts], dtype="S64")
    buffer = io.BytesIO()
    np.savez(buffer, keys=keys, embedding=embedding)
    path = directory / (name or f"shard-{hashlib.sha256(repr(texts).encode()).hexdigest()[:32]}.npz")
    path.write_bytes(buffer.getvalue())
    return path


def test_legacy_shards_without_checksum_are_kept_and_upgraded_with_one_warning(tmp_path):
    directory = EmbeddingCache(tmp_path, "model-x").directory
    shards = [legacy_shard(directory, [f"t{i}a", f"t{i}b"], np.full((2, 3), i, dtype=np.float32))
              for i in range(5)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cache = EmbeddingCache(tmp_path, "model-x")
    scarce_warnings = [w for w in caught if issubclass(w.category, ScarceWarning)]
    assert len(scarce_warnings) == 1, [str(w.message) for w in scarce_warnings]
    assert "5 embedding cache shard(s)" in str(scarce_warnings[0].message)
    assert "rewritten with a checksum" in str(scarce_warnings[0].message)
    assert scarce_warnings[0].filename == __file__  # points at the caller, not into scarce
    assert not list(directory.glob("*.rejected"))
    for shard in shards:  # rewritten in place with a checksum that read_shard verifies
        assert not isinstance(read_shard(shard), str)
    found, values = cache.lookup(["t3b", "t0a", "new"])
    assert found.tolist() == [True, True, False]
    np.testing.assert_array_equal(values["embedding"][:2], [[3, 3, 3], [0, 0, 0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error", ScarceWarning)  # upgraded once: the next opening is silent
        assert EmbeddingCache(tmp_path, "model-x").lookup(["t4a"])[0].all()


def test_legacy_shard_in_a_read_only_cache_is_still_used(tmp_path, monkeypatch):
    directory = EmbeddingCache(tmp_path, "model-x").directory
    shard = legacy_shard(directory, ["a"], np.ones((1, 2), dtype=np.float32))
    from scarce.encoders import cache as cache_module

    def refuse(path, data):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(cache_module, "atomic_write_bytes", refuse)
    with pytest.warns(ScarceWarning, match="could not be rewritten with a checksum \\(Permission denied\\)"):
        cache = EmbeddingCache(tmp_path, "model-x")
    assert cache.lookup(["a"])[0].all() and "carries no checksum" in read_shard(shard)


def test_a_legacy_shard_changed_after_opening_is_not_trusted(tmp_path, monkeypatch):
    directory = EmbeddingCache(tmp_path, "model-x").directory
    shard = legacy_shard(directory, ["a"], np.ones((1, 2), dtype=np.float32))
    from scarce.encoders import cache as cache_module

    monkeypatch.setattr(cache_module, "atomic_write_bytes", lambda path, data: (_ for _ in ()).throw(OSError()))
    with pytest.warns(ScarceWarning, match="carry no checksum"):
        cache = EmbeddingCache(tmp_path, "model-x")
    legacy_shard(directory, ["a"], np.full((1, 2), 7, dtype=np.float32), name="other.npz").replace(shard)
    with pytest.warns(ScarceWarning, match="checksum does not match"):
        assert not cache.lookup(["a"])[0].any()


def test_tampered_shard_with_a_checksum_is_still_rejected_after_legacy_support(tmp_path):
    _, shard = filled_cache(tmp_path)
    arrays = dict(np.load(shard))
    arrays["embedding"] = arrays["embedding"] * 2  # the checksum member is kept, now wrong
    np.savez(shard, **arrays)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cache = EmbeddingCache(tmp_path, "model-x")
        found, _ = cache.lookup(["a", "b"])
    messages = [str(w.message) for w in caught if issubclass(w.category, ScarceWarning)]
    assert not found.any() and len(messages) == 1 and "checksum does not match" in messages[0]
    assert "carry no checksum" not in messages[0]
    assert [w.filename for w in caught] == [__file__]


def test_opening_reads_only_keys_and_each_shard_is_hashed_once(tmp_path, monkeypatch):
    cache = EmbeddingCache(tmp_path, "model-x")
    for i in range(3):
        cache.store([f"x{i}", f"y{i}"], {"embedding": np.full((2, 4), i, dtype=np.float32)})
    from scarce.encoders import cache as cache_module

    hashed = []
    real = cache_module.shard_checksum
    monkeypatch.setattr(cache_module, "shard_checksum", lambda arrays: hashed.append(1) or real(arrays))
    reopened = EmbeddingCache(tmp_path, "model-x")
    assert hashed == [] and len(reopened) == 6  # the index is built from keys and checksums only
    texts = [f"{p}{i}" for p in "xy" for i in range(3)]
    for _ in range(3):
        found, values = reopened.lookup(texts)
        assert found.all() and values["embedding"][:, 0].tolist() == [0, 1, 2, 0, 1, 2]
    assert len(hashed) == 3  # once per shard, not once per opening and again per lookup


def test_a_verified_shard_replaced_later_is_verified_again(tmp_path):
    cache, shard = filled_cache(tmp_path)
    assert cache.lookup(["a", "b"])[0].all()
    arrays = dict(np.load(shard))
    arrays["embedding"] = arrays["embedding"] + 5
    np.savez(shard.with_name("other.npz"), **arrays)
    shard.with_name("other.npz").replace(shard)  # a new file: the recorded verification does not carry over
    with pytest.warns(ScarceWarning, match="checksum does not match"):
        assert not cache.lookup(["a", "b"])[0].any()


def test_a_shard_cut_to_fewer_rows_after_opening_is_not_trusted(tmp_path):
    cache, shard = filled_cache(tmp_path)
    arrays = dict(np.load(shard))
    rewrite(shard, {"keys": arrays["keys"][:1].copy(), "embedding": arrays["embedding"][:1].copy()})
    with pytest.warns(ScarceWarning, match="rows changed"):
        assert not cache.lookup(["a", "b"])[0].any()


def test_store_refuses_a_shard_without_fields(tmp_path):
    with pytest.raises(ScarceError, match="at least one field"):
        EmbeddingCache(tmp_path, "model-x").store(["a"], {})


# ---------------------------------------------------------------------- item 8: devices, outputs

@pytest.mark.parametrize("name", ["CPU", " cpu", "Cpu\n", "cpu:0"])
def test_device_names_in_any_case_or_spacing_are_returned_canonical(name):
    torch = pytest.importorskip("torch")
    from scarce.encoders.device import check_device

    device = check_device(name)
    assert device == name.strip().lower()
    assert torch.zeros(1).to(device).device.type == "cpu"


def test_unreadable_jsonl_corpus_is_a_clear_error(tmp_path, monkeypatch):
    path = jsonl(tmp_path, [json.dumps(GOOD)])

    def denied(self, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(corpus_module.Path, "open", denied)
    with pytest.raises(ScarceError, match=re.escape(repr(str(path))) + " cannot be read: Permission denied"):
        read_corpus(path)


def test_parquet_corpus_footer_reader_is_closed(tmp_path, llm_corpus, monkeypatch):
    import pyarrow.parquet as pq

    path = write_corpus(llm_corpus, tmp_path / "c.parquet")
    closed = []
    real_close = pq.ParquetFile.close
    monkeypatch.setattr(pq.ParquetFile, "close", lambda self, force=False: closed.append(1) or real_close(self))
    assert len(read_corpus(path)) == len(llm_corpus)
    assert closed


def test_artifact_removed_between_size_check_and_open_is_reported_missing(tmp_path, monkeypatch):
    from scarce.datasets import jailbreakbench

    path = tmp_path / "PAIR" / "black_box" / "m.json"
    monkeypatch.setattr(jailbreakbench, "check_file_size", lambda *args: None)  # the file vanishes after it
    with pytest.raises(ScarceError, match="does not exist"):
        read_attack_artifact(path)
    with pytest.raises(ScarceError, match="does not exist"):
        read_behaviors(tmp_path / "harmful-behaviors.csv", harmful=True)



def test_cuda_on_a_machine_without_it_is_a_clear_error():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    frame = pd.DataFrame({"prompt": ["p"], "response": ["r"]})
    with pytest.raises(ScarceError, match=r"device 'cuda' cannot be used: .*available devices: cpu"):
        embed_corpus(frame, "minilm", device="cuda")
    with pytest.raises(ScarceError, match=r"device must be 'cpu', 'cuda', 'cuda:<index>' or 'mps', got 'gpu'"):
        embed_corpus(frame, "minilm", device="gpu")


def test_embed_refuses_a_bad_device_or_output_before_reading(tmp_path):
    (tmp_path / "out.parquet").mkdir()
    missing = tmp_path / "missing.jsonl"
    result = invoke("embed", "--corpus", missing, "--out", tmp_path / "out.parquet")
    assert result.exit_code == 2 and "is an existing directory" in result.output, result.output
    result = invoke("embed", "--corpus", missing, "--out", tmp_path / "c.jsonl")
    assert result.exit_code == 2 and "must end in .parquet" in result.output, result.output
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        result = invoke("embed", "--corpus", missing, "--out", tmp_path / "c.parquet", "--device", "cuda")
        assert result.exit_code == 2 and "device 'cuda' cannot be used" in result.output, result.output


def test_report_refuses_an_output_that_is_a_file(tmp_path, llm_corpus):
    LLMSweep(get_preset("tiny"), tmp_path / "run", corpus=llm_corpus).setup()
    (tmp_path / "taken").write_text("x")
    for out in (tmp_path / "taken", tmp_path / "taken" / "below"):
        result = invoke("report", "--run-dir", tmp_path / "run", "--out", out)
        assert result.exit_code == 2, result.output
        assert "exists and is not a directory" in result.output, result.output
