"""Shared fixtures: a small synthetic LLM corpus with embeddings (no data files, no encoder)."""

from __future__ import annotations

import numpy as np
import pytest


def synthetic_corpus(seed: int = 0, dim: int = 8):
    """Benign records, two PAIR targets with jailbreaks, one without, and a GCG group.

    Jailbroken records sit along +e_0, benign ones along -e_0, failed attacks in between, so
    linear rulers separate them; a benign record or two overlap the attacks (some leakage).
    """
    import pandas as pd

    rng = np.random.default_rng(seed)
    rows = []

    def add(method, target, n, n_jb, centre_jb, centre_no):
        for i in range(n):
            jb = i < n_jb
            z = rng.normal(size=dim) * 0.6
            z[0] += centre_jb if jb else centre_no
            rows.append({"record_id": f"{method}-{target}-{i}", "behavior_id": f"b{i % 7}",
                         "method": method, "target_model": target, "jailbroken": jb,
                         "prompt": f"p {method} {i}", "response": f"r {i}", "embedding": z.astype(np.float32)})

    add("none", "none", 40, 0, 0.0, -2.0)
    add("PAIR", "model-a", 30, 20, 2.0, 0.0)
    add("PAIR", "model-b", 25, 10, 2.2, 0.2)
    add("PAIR", "model-c", 4, 0, 0.0, 0.0)
    add("GCG", "model-a", 30, 12, 1.6, -0.3)
    return pd.DataFrame(rows)


def with_bad_embedding(corpus, row: int, column: int, value: float):
    """A copy of ``corpus`` whose embedding of ``row`` holds ``value`` at ``column`` (NaN or inf checks)."""
    bad = corpus.copy()
    vector = bad.embedding.iloc[row].copy()
    vector[column] = value
    bad.at[row, "embedding"] = vector
    return bad


@pytest.fixture
def llm_corpus():
    return synthetic_corpus()
