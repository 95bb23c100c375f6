"""Hostile-input audit (issue 18) of the applications: problems the command-line and reader audits
traced to code outside their files (the vision preset, the LLM corpus, sources and transfer, the
report's output check, the judge encoder, the MNIST loader's messages).

Each test pins one of them: a foreign exception (UnicodeEncodeError, TypeError, OSError, a
transformers ValueError), a silently wrong result (a ruler listed twice, a key named twice, an
unchecked transfer setting) or a message offering what is not allowed. No network, no data files.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("pandas")
from typer.testing import CliRunner  # noqa: E402

from scarce.cli import app  # noqa: E402
from scarce.errors import ScarceError  # noqa: E402

runner = CliRunner()
LONG = "x" * 300  # a file name longer than the 255 bytes a file system allows


def _text(result) -> str:  # type: ignore[no-untyped-def]
    return " ".join(result.output.split())


# ------------------------------------------------------------------ 1. vision preset rulers
def test_vision_preset_refuses_a_ruler_listed_twice():
    from scarce.applications.vision.protocol import get_preset, parse_overrides

    for setting in ("rulers=centroid,centroid,mah_bad", "feature_rulers=boundary,boundary"):
        key = setting.partition("=")[0]
        with pytest.raises(ScarceError, match=rf"{key} holds the ruler '\w+' twice"):
            get_preset("quick", **parse_overrides([setting, "top_k=1"], "quick"))
    preset = get_preset("quick", rulers=["mah_bad", "centroid"], top_k=2)  # each once: kept, in order
    assert preset.rulers == ("mah_bad", "centroid") and preset.config()["rulers"] == ["mah_bad", "centroid"]


# ------------------------------------------------------------------ 2. read_corpus JSON rules
_RECORD = '{"record_id": "r1", "method": "PAIR", "target_model": "m", "jailbroken": true, "prompt": %s}\n'


def test_read_corpus_refuses_a_lone_surrogate(tmp_path):
    from scarce.applications.llm.corpus import read_corpus

    path = tmp_path / "corpus.jsonl"
    path.write_text(_RECORD % '"ok"' + _RECORD.replace('"r1"', '"r2"') % r'"\ud800"')
    with pytest.raises(ScarceError, match=r"line 2: holds text that is not valid Unicode"):
        read_corpus(path)


def test_read_corpus_refuses_a_key_named_twice(tmp_path):
    from scarce.applications.llm.corpus import read_corpus

    path = tmp_path / "corpus.jsonl"
    path.write_text(_RECORD.replace('"jailbroken": true', '"jailbroken": true, "jailbroken": false') % '"p"')
    with pytest.raises(ScarceError, match=r"line 1: key 'jailbroken' appears twice in one object"):
        read_corpus(path)


def test_read_corpus_refuses_a_name_too_long(tmp_path):
    from scarce.applications.llm.corpus import read_corpus

    with pytest.raises(ScarceError, match="corpus file .* cannot be read"):
        read_corpus(tmp_path / f"{LONG}.jsonl")


# ------------------------------------------------------------------ 3. read_conversations options
def test_read_conversations_refuses_options_of_the_other_jailbreakbench_reader(jbb):
    from scarce.applications.llm.sources import read_conversations

    artifact = jbb / "attack-artifacts" / "GCG" / "transfer" / "gpt-4.json"
    with pytest.raises(ScarceError, match=r"option\(s\) method do not apply to the jailbreakbench format's data "
                                          r"directory .* \(it takes: include_benign\)"):
        read_conversations(jbb, format="jailbreakbench", method="x")
    with pytest.raises(ScarceError, match=r"option\(s\) include_benign do not apply to the jailbreakbench format's "
                                          r"artifact file .* \(it takes: method, attack_type\)"):
        read_conversations(artifact, format="jailbreakbench", include_benign=False)
    assert set(read_conversations(artifact, format="jailbreakbench", method="M")["method"]) == {"M"}
    assert (read_conversations(jbb, format="jailbreakbench", include_benign=False)["method"] != "none").all()


# ------------------------------------------------------------------ 4. TransferConfig settings
@pytest.mark.parametrize("settings, message", [
    ({"seed": -1}, r"seed must be an integer >= 0, got -1"),
    ({"seed": 1.5}, r"seed must be an integer >= 0, got 1.5"),
    ({"etas": ()}, r"etas must list at least one adversarial fraction"),
    ({"etas": (1e-3, 0.001)}, r"etas holds the same value twice: 0.001"),
    ({"n_samples": 9, "level_probability": 0.1}, r"n_samples \* level_probability must be >= 1"),
    ({"stop_factor": 2.0}, r"stop_factor must be in \(0, 1\]"),
])
def test_transfer_config_refuses_bad_seed_etas_and_level_sizes(settings, message):
    from scarce.applications.llm.transfer import TransferConfig

    with pytest.raises(ScarceError, match=message):
        TransferConfig(**settings)


# ------------------------------------------------------------------ 5. output checks, long names
def test_output_checks_refuse_a_name_too_long(tmp_path):
    from scarce.applications.llm.corpus import check_corpus_output
    from scarce.reporting.llm import check_output_dir

    for call, path in ((check_output_dir, tmp_path / LONG), (check_output_dir, tmp_path / LONG / "report"),
                       (check_corpus_output, tmp_path / f"{LONG}.parquet"),
                       (check_corpus_output, tmp_path / LONG / "out.parquet")):
        with pytest.raises(ScarceError, match="cannot be used: File name too long; allowed: a"):
            call(path)


# ------------------------------------------------------------------ 6. judge model names
def test_judge_model_that_is_no_folder_or_cached_model_is_a_scarce_error(tmp_path):
    pytest.importorskip("transformers")
    from scarce.encoders.judge import JudgeEncoder

    with pytest.raises(ScarceError, match=r"model '.*missing' is not a folder on this machine; allowed: a local"):
        JudgeEncoder(model=str(tmp_path / "missing"), device="cpu")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ScarceError, match=r"model '.*empty' cannot be loaded \(.*\); allowed: a local folder"):
        JudgeEncoder(model=str(tmp_path / "empty"), device="cpu")


def test_embed_with_a_judge_folder_without_weights_is_a_clean_error(tmp_path):
    pytest.importorskip("transformers")
    source, folder = tmp_path / "x.jsonl", tmp_path / "judge"
    source.write_text("".join(json.dumps({"prompt": p, "response": "r", "label": i}) + "\n"
                              for i, p in enumerate("pq")))
    folder.mkdir()
    result = runner.invoke(app, ["llm", "embed", "--input", str(source), "--encoder", "judge", "--model",
                                 str(folder), "--out", str(tmp_path / "out.parquet"), "--device",
                                 "cpu", "--cache-dir", str(tmp_path / "cache")])
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit), repr(result.exception)  # no traceback
    assert f"model {str(folder)!r} cannot be loaded" in _text(result) and "allowed: a local folder" in _text(result)


# ------------------------------------------------------------------ 7. MNIST messages
def test_paper_preset_missing_mnist_does_not_offer_the_embedded_digits(tmp_path):
    for data_dir in (tmp_path / "missing", tmp_path):
        result = runner.invoke(app, ["vision", "--preset", "paper", "--data-dir", str(data_dir),
                                     "--run-dir", str(tmp_path / "run")])
        assert result.exit_code != 0 and ("MNIST IDX files" in _text(result) or "MNIST files missing" in _text(result))
        assert "embedded" not in _text(result), _text(result)


def test_mnist_from_the_environment_offers_the_embedded_digits(tmp_path, monkeypatch):
    from scarce.datasets.mnist import ENV_VAR, load_mnist

    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    with pytest.raises(ScarceError, match=rf"MNIST files missing: .* or unset {ENV_VAR} to use the embedded"):
        load_mnist()
    with pytest.raises(ScarceError, match="MNIST files missing") as error:
        load_mnist(tmp_path)
    assert "embedded" not in str(error.value)


def test_sweep_config_refuses_a_level_without_a_seed():
    """N * p0 < 1 leaves no seed a level: refused when the sweep is configured, not in its cells."""
    from scarce.applications.llm.sweep import SweepConfig

    with pytest.raises(ScarceError, match=r"n_samples \* level_probability must be >= 1.*10 \* 0.05"):
        SweepConfig(name="x", n_samples=10, level_probability=0.05)


@pytest.mark.parametrize("eta", [True, np.bool_(True), "0.5", b"0.5"])
def test_an_eta_that_is_no_number_is_refused_not_read_as_one(eta):
    """``True`` read as eta = 1.0 and ``"0.5"`` as 0.5: meanings the caller did not write."""
    from scarce.applications.llm.fleet import check_eta
    from scarce.applications.llm.transfer import TransferConfig

    with pytest.raises(ScarceError, match="eta must be a number in"):
        check_eta(eta)
    with pytest.raises(ScarceError, match="eta must be a number in"):
        TransferConfig(etas=(eta,))
