"""The corpus table: Parquet and JSON Lines round trips, checks and attack groups."""

from __future__ import annotations

import json

import numpy as np
import pytest

pd = pytest.importorskip("pandas")
pytest.importorskip("pyarrow")

from scarce.applications.llm.corpus import (  # noqa: E402
    benign_mask,
    check_corpus,
    group_mask,
    group_names,
    read_corpus,
    record_groups,
    write_corpus,
)
from scarce.applications.llm.embedding import embedding_matrix  # noqa: E402
from conftest import with_bad_embedding  # noqa: E402
from scarce.errors import ScarceError  # noqa: E402


def test_parquet_round_trip_keeps_records_labels_and_embeddings(tmp_path, llm_corpus):
    path = write_corpus(llm_corpus, tmp_path / "c.parquet")
    back = read_corpus(path)
    assert list(back.record_id) == list(llm_corpus.record_id)
    assert back.jailbroken.dtype == bool and back.jailbroken.sum() == llm_corpus.jailbroken.sum()
    np.testing.assert_array_equal(embedding_matrix(back), np.stack(llm_corpus.embedding))
    assert not list(tmp_path.glob("*.tmp*"))  # atomic: no temporary file left behind


def test_jsonl_reader_fills_optional_columns(tmp_path):
    lines = [{"record_id": "a", "method": "PAIR", "target_model": "m", "jailbroken": 1, "turn": 2,
              "embedding": [0.0, 1.0]},
             {"record_id": "b", "method": "none", "target_model": "none", "jailbroken": 0,
              "embedding": [1.0, 0.0]}]
    path = tmp_path / "c.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n\n")
    frame = read_corpus(path)
    assert frame.jailbroken.tolist() == [True, False]
    assert frame.harmful.tolist() == [True, False]
    assert frame.prompt.tolist() == ["", ""]
    assert embedding_matrix(frame).shape == (2, 2)
    assert record_groups(frame).tolist() == ["turn=2", ""]


def test_jsonl_reader_names_the_bad_line(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text('{"record_id": "a"}\n{not json}\n')
    with pytest.raises(ScarceError, match="line 2"):
        read_corpus(path)


@pytest.mark.parametrize("name, suffix", [("missing.parquet", None), ("c.csv", "x")])
def test_reader_rejects_missing_files_and_unknown_suffixes(tmp_path, name, suffix):
    if suffix:
        (tmp_path / name).write_text(suffix)
    with pytest.raises(ScarceError, match="does not exist|unknown suffix"):
        read_corpus(tmp_path / name)


def test_groups_are_method_target_pairs_without_turns(llm_corpus):
    frame = check_corpus(llm_corpus)
    assert group_names(frame, "PAIR") == ["PAIR/model-a", "PAIR/model-b", "PAIR/model-c"]
    assert group_mask(frame, "PAIR/model-b").sum() == 25
    assert group_mask(frame, "GCG").sum() == 30  # a method name is its pooled group
    assert benign_mask(frame).sum() == 40
    assert not (group_mask(frame, "PAIR") & benign_mask(frame)).any()


def test_unknown_group_suggests_the_closest(llm_corpus):
    with pytest.raises(ScarceError, match="PAIR/model-a"):
        group_mask(check_corpus(llm_corpus), "PAIR/model-aa")


@pytest.mark.parametrize("change, message", [
    (lambda f: f.drop(columns="jailbroken"), "lacks column"),
    (lambda f: f.assign(record_id="same"), "record_id must be unique"),
    (lambda f: f.assign(jailbroken="yes"), "jailbroken must be True/False"),
    (lambda f: f.iloc[:0], "no records"),
])
def test_check_corpus_rejects_bad_tables(llm_corpus, change, message):
    with pytest.raises(ScarceError, match=message):
        check_corpus(change(llm_corpus))


def test_nan_in_embeddings_is_refused_with_its_location(llm_corpus):
    bad = with_bad_embedding(llm_corpus, row=3, column=1, value=np.nan)
    with pytest.raises(ScarceError, match="(?i)nan|finite"):
        check_corpus(bad, require_embedding=True)


def test_ragged_embeddings_are_refused(llm_corpus):
    bad = llm_corpus.copy()
    bad.at[0, "embedding"] = np.zeros(3, np.float32)
    with pytest.raises(ScarceError, match="(?i)dimension|length|ragged|shape"):
        check_corpus(bad, require_embedding=True)


def test_a_corpus_file_records_what_made_its_embeddings(tmp_path, llm_corpus):
    import pyarrow.parquet as pq

    from scarce.applications.llm.corpus import EMBEDDING_METADATA

    frame = llm_corpus.copy()
    frame.attrs["embedding"] = {"encoder": "minilm", "identity": '{"rendering": "User: <prompt>"}', "dimension": 8}
    path = write_corpus(frame, tmp_path / "corpus.parquet")
    assert read_corpus(path).attrs["embedding"] == frame.attrs["embedding"]
    plain = write_corpus(llm_corpus, tmp_path / "plain.parquet")
    assert "embedding" not in read_corpus(plain).attrs
    # metadata that is not a JSON object is refused, by name, and never evaluated
    table = pq.read_table(path)
    for bad in (b"[1, 2]", b"not json", b"{" * 5000):
        pq.write_table(table.replace_schema_metadata({**table.schema.metadata, EMBEDDING_METADATA: bad}),
                       tmp_path / "bad.parquet")
        with pytest.raises(ScarceError, match="embedding metadata is damaged"):
            read_corpus(tmp_path / "bad.parquet")
