"""Leave-one-style-out transfer of LLM rulers, on small synthetic corpora."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from conftest import synthetic_corpus
from typer.testing import CliRunner

from scarce.applications.llm.transfer import TransferConfig, best_per_pair, transfer_matrix
from scarce.cli import app
from scarce.errors import ScarceError

SMALL = dict(styles=("PAIR", "GCG"), variants=("centroid_p50", "fisher_p75"), n_samples=500, n_runs=4)


def _shifted_style_corpus():
    """A third style whose jailbreaks sit along +e_1, where rulers fitted on PAIR do not look."""
    corpus = synthetic_corpus()
    rng = np.random.default_rng(5)
    rows = []
    for i in range(30):
        z = rng.normal(size=8) * 0.3
        z[1] += 3.0 if i < 10 else 0.0
        z[0] -= 1.0
        rows.append({"record_id": f"JBC-m-{i}", "behavior_id": "b0", "method": "JBC", "target_model": "model-a",
                     "jailbroken": i < 10, "prompt": "p", "response": "r", "embedding": z.astype(np.float32)})
    return pd.concat([corpus, pd.DataFrame(rows)], ignore_index=True)


def test_every_style_is_applied_to_every_other_with_both_calibrations():
    table = transfer_matrix(synthetic_corpus(), TransferConfig(**SMALL))
    assert set(zip(table.fitted, table.applied)) >= {("PAIR", "GCG"), ("GCG", "PAIR")}
    # PAIR's model-a and model-b groups have >= 20 records and >= 5 jailbreaks; model-c has neither
    assert {"PAIR/model-a", "PAIR/model-b"} <= set(table.applied) and "PAIR/model-c" not in set(table.applied)
    usable = table[np.isfinite(table.error_refit)]
    assert len(usable) and (usable.exact_refit > 0).all()
    # a refit C_tau makes P(A) C / p_ref exactly 1 when no benign record leaks above tau
    clean, leaky = usable[usable.benign_mass == 0], usable[usable.benign_mass > 0]
    assert len(clean) and np.allclose(clean.exact_refit, 1.0)
    assert (leaky.exact_refit > 1.0).all()  # benign users above tau inflate the surrogate
    assert (table.factor_inherited.notna()).all()


def test_a_style_the_rulers_cannot_see_has_recall_zero_and_no_calibration():
    table = transfer_matrix(_shifted_style_corpus(), TransferConfig(**{**SMALL, "styles": ("PAIR", "JBC")}))
    to_jbc = table[(table.fitted == "PAIR") & (table.applied == "JBC")]
    assert (to_jbc.recall == 0).any()
    blind = to_jbc[to_jbc.recall == 0]
    assert blind.factor_refit.isna().all() and blind.error_refit.isna().all()
    summary = best_per_pair(table)
    row = summary[(summary.fitted == "PAIR") & (summary.applied == "JBC")].iloc[0]
    assert row.n_recall_zero == len(blind) and all(v in row.recall_zero for v in blind.variant)


def test_cells_are_reproducible_and_independent_of_which_styles_ran():
    a = transfer_matrix(synthetic_corpus(), TransferConfig(**SMALL))
    b = transfer_matrix(synthetic_corpus(), TransferConfig(**SMALL))
    pd.testing.assert_frame_equal(a, b)


@pytest.mark.parametrize("config, message", [
    (dict(styles=("PAIR", "DSN")), "style 'DSN' has no records in the corpus; its attack styles are"),
    (dict(styles=("PAIR",)), "at least two distinct attack styles"),
    (dict(variants=("nope_p50",)), "nope_p50"),
    (dict(variants=("centroid",)), "rulers at a percentile, <family>_p<percentile>"),
    (dict(etas=(0.0,)), "eta"),
])
def test_bad_transfer_settings_are_refused(config, message):
    with pytest.raises(ScarceError, match=message):
        transfer_matrix(synthetic_corpus(), TransferConfig(**{**SMALL, **config}))


def test_a_corpus_without_benign_records_is_refused():
    corpus = synthetic_corpus()
    with pytest.raises(ScarceError, match="no benign records"):
        transfer_matrix(corpus[corpus.method != "none"], TransferConfig(**SMALL))


def test_cli_writes_the_table_and_every_cell(tmp_path):
    corpus = tmp_path / "corpus.parquet"
    synthetic_corpus().to_parquet(corpus)
    out = tmp_path / "transfer"
    result = CliRunner().invoke(app, ["llm", "transfer", "--corpus", str(corpus), "--out", str(out), "--styles",
                                      "PAIR,GCG", "--n-samples", "500", "--n-runs", "3"])
    assert result.exit_code == 0, result.output
    text = (out / "transfer.md").read_text()
    assert "| fitted on | applied to |" in text and "| PAIR | GCG |" in text
    cells = pd.read_parquet(out / "transfer.parquet")
    assert len(cells) and math.isfinite(cells.threshold.iloc[0])
    bad = CliRunner().invoke(app, ["llm", "transfer", "--corpus", str(corpus), "--out", str(tmp_path / "t2"),
                                   "--etas", "abc"])
    assert bad.exit_code == 2 and "--etas takes comma-separated numbers" in bad.output
    one = CliRunner().invoke(app, ["llm", "transfer", "--corpus", str(corpus), "--out", str(tmp_path / "t3"),
                                   "--styles", "PAIR"])
    assert one.exit_code == 2 and "at least two distinct attack styles" in one.output and "--etas" not in one.output


def _two_part_corpus():
    """The synthetic corpus re-embedded as ``[prompt, response]``: the prompt half marks the style
    (PAIR's jailbreaks sit far along it), the response half holds the jailbreak signal."""
    import json

    corpus = synthetic_corpus()
    response = np.stack(corpus.embedding.to_numpy())
    prompt = np.zeros_like(response)
    prompt[:, 0] = np.where((corpus.method == "PAIR") & corpus.jailbroken, 25.0, 0.0)
    corpus["embedding"] = list(np.hstack([prompt, response]).astype(np.float32))
    corpus.attrs = {"embedding": {"identity": json.dumps({"parts": "separate"}), "dimension": 16}}
    return corpus


def test_rulers_see_the_response_half_of_a_two_part_embedding():
    corpus = _two_part_corpus()
    auto = transfer_matrix(corpus, TransferConfig(**SMALL))
    whole = transfer_matrix(corpus, TransferConfig(**SMALL, view="conversation"))
    assert set(auto.view) == {"response"} and set(whole.view) == {"conversation"}
    pd.testing.assert_frame_equal(auto, transfer_matrix(corpus, TransferConfig(**SMALL, view="response")))
    # fitted on PAIR, the whole vector keys on PAIR's prompt marker, which GCG's jailbreaks lack
    from_pair = lambda t: t[(t.fitted == "PAIR") & (t.applied == "GCG")].recall  # noqa: E731
    assert from_pair(auto).max() > 0.05 and from_pair(whole).max() == 0.0
    # a corpus without the two-part record takes the whole vector under auto, and refuses "response"
    assert set(transfer_matrix(synthetic_corpus(), TransferConfig(**SMALL)).view) == {"conversation"}
    with pytest.raises(ScarceError, match="view='response' needs a corpus embedded with the prompt and the response"):
        transfer_matrix(synthetic_corpus(), TransferConfig(**SMALL, view="response"))
    with pytest.raises(ScarceError, match="view"):
        TransferConfig(view="prompt")
    # records without a response (an all-zero half) are one point under the response view: said
    from scarce.applications.llm.transfer import ruler_view
    from scarce.errors import ScarceWarning

    Z = np.stack(corpus.embedding.to_numpy()).astype(float)
    Z[:3, 8:] = 0.0
    with pytest.warns(ScarceWarning, match="3 record"):
        ruler_view(corpus, Z, "response")
    # a two-part record whose vectors were cut afterwards is not halved blindly
    cut = corpus.assign(embedding=[v[:12] for v in corpus.embedding])
    cut.attrs = corpus.attrs
    assert set(transfer_matrix(cut, TransferConfig(**SMALL)).view) == {"conversation"}
    with pytest.raises(ScarceError, match="dimension 16, but its vectors have 12 coordinates"):
        transfer_matrix(cut, TransferConfig(**SMALL, view="response"))
