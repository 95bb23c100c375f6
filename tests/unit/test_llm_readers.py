"""JailbreakBench readers on small files written in the test (and, optionally, the shared data)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pd = pytest.importorskip("pandas")

from scarce.datasets import (  # noqa: E402
    CORPUS_COLUMNS,
    load_jailbreakbench_corpus,
    read_attack_artifact,
    read_attack_artifacts,
    read_behaviors,
    resolve_jailbreakbench_dir,
)
from conftest import SHARED_DATA, entry, write_artifact, write_behaviors  # noqa: E402
from scarce.errors import ScarceError  # noqa: E402

SHARED = SHARED_DATA


def test_one_artifact_drops_failed_entries_and_recounts(jbb):
    frame = read_attack_artifact(jbb / "attack-artifacts/PAIR/black_box/vicuna-13b-v1.5.json")
    assert list(frame.columns) == list(CORPUS_COLUMNS)
    prefix = "PAIR/black_box/vicuna-13b-v1.5/"
    assert frame["record_id"].tolist() == [prefix + "0", prefix + "2"]
    assert frame["behavior_id"].tolist() == ["harmful/0", "harmful/2"]
    assert frame["jailbroken"].tolist() == [True, False] and frame["harmful"].all()
    assert frame["turn"].isna().all() and frame["judge_score"].isna().all()
    summary = frame.attrs["summary"]
    assert summary["entries"] == 3 and summary["records"] == 2 and summary["dropped_no_prompt"] == 1
    assert summary["jailbreaks"] == 1 and summary["stated_jailbreaks"] == 3 and summary["stale_total"]


def test_all_artifacts_and_the_corpus(jbb, monkeypatch):
    attacks = read_attack_artifacts(jbb)
    assert len(attacks) == 4 and attacks.attrs["dropped_no_prompt"] == 1
    assert sorted(set(attacks["method"])) == ["GCG", "PAIR"]
    assert sorted(set(attacks["target_model"])) == ["gpt-4", "vicuna-13b-v1.5"]
    corpus = load_jailbreakbench_corpus(jbb.parent)  # a data directory with jailbreakbench/ works too
    assert corpus.attrs["counts"] == {"attack_records": 4, "dropped_no_prompt": 1, "jailbreaks": 2,
                                      "benign_records": 2, "records": 6}
    benign = corpus[~corpus["harmful"]]
    assert benign["prompt"].tolist() == ["Write a poem", "Bake, then eat"]
    assert (benign["response"] == "").all() and not benign["jailbroken"].any()
    assert set(benign["method"]) == {"none"} and benign["record_id"].tolist() == ["benign/0", "benign/1"]
    assert corpus.dtypes.astype(str).to_dict() == CORPUS_COLUMNS and corpus["record_id"].is_unique
    monkeypatch.setenv("SCARCE_DATA_DIR", str(jbb.parent))
    assert len(load_jailbreakbench_corpus(include_benign=False)) == 4


def test_parquet_round_trip(jbb, tmp_path):
    pytest.importorskip("pyarrow")
    corpus = load_jailbreakbench_corpus(jbb)
    path = tmp_path / "corpus.parquet"
    corpus.to_parquet(path)
    back = pd.read_parquet(path)
    pd.testing.assert_frame_equal(back, corpus, check_dtype=False)


def test_behaviors_csv(jbb):
    frame = read_behaviors(jbb / "behaviors/benign-behaviors.csv", harmful=False)
    assert frame["behavior_id"].tolist() == ["benign/0", "benign/1"]
    assert frame["goal"].tolist() == ["Write a poem", "Bake, then eat"]
    assert frame["target"].iloc[1] == "Sure, Bake, then eat"


def test_missing_or_bad_data_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.delenv("SCARCE_DATA_DIR", raising=False)
    with pytest.raises(ScarceError, match="SCARCE_DATA_DIR"):
        resolve_jailbreakbench_dir(None)
    with pytest.raises(ScarceError, match="no JailbreakBench data found"):
        load_jailbreakbench_corpus(tmp_path)
    monkeypatch.setenv("SCARCE_DATA_DIR", str(tmp_path / "nowhere"))
    with pytest.raises(ScarceError, match="environment variable SCARCE_DATA_DIR"):
        load_jailbreakbench_corpus()
    bad = tmp_path / "X" / "y" / "m.json"
    bad.parent.mkdir(parents=True)
    bad.write_text("[1, 2]")
    with pytest.raises(ScarceError, match="'jailbreaks' list"):
        read_attack_artifact(bad)
    bad.write_text(json.dumps({"jailbreaks": [{"index": 0, "prompt": "p"}]}))
    with pytest.raises(ScarceError, match="no 'jailbroken' flag"):
        read_attack_artifact(bad)
    bad.write_text(json.dumps({"jailbreaks": [entry(0, "p", "yes")]}))
    with pytest.raises(ScarceError, match="'jailbroken' must be true or false"):
        read_attack_artifact(bad)
    bad.write_text(json.dumps({"jailbreaks": [entry(0, "p", True), entry(0, "q", False)]}))
    with pytest.raises(ScarceError, match="index 0 appears twice"):
        read_attack_artifact(bad)
    (tmp_path / "h.csv").write_text("id,text\n0,x\n")
    with pytest.raises(ScarceError, match="lacks column"):
        read_behaviors(tmp_path / "h.csv", harmful=True)


def test_import_stays_light():
    code = ("import sys, scarce, scarce.datasets, scarce.encoders, scarce.applications.llm; "
            "print(sorted(m for m in ('torch', 'pandas', 'transformers', 'sentence_transformers') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.skipif(not (SHARED / "jailbreakbench" / "attack-artifacts").is_dir(),
                    reason="shared JailbreakBench data not available")
def test_shared_jailbreakbench_counts():
    corpus = load_jailbreakbench_corpus(SHARED)
    counts = corpus.attrs["counts"]
    assert counts["attack_records"] + counts["dropped_no_prompt"] == 14 * 100
    assert counts["dropped_no_prompt"] == 163 and counts["benign_records"] == 100
    assert sorted(set(corpus["method"]) - {"none"}) == ["DSN", "GCG", "JBC", "PAIR"]
    pair = [s for s in corpus.attrs["files"] if s["method"] == "PAIR"]
    assert any(s["stale_total"] for s in pair)
