"""Rulers: the registry, per-family formulas and bad input (the contract over every registered name runs
in tests/contract/test_contracts.py through scarce.testing.check_ruler)."""

from __future__ import annotations

import subprocess
import sys
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.covariance import OAS, LedoitWolf
from sklearn.decomposition import PCA
from sklearn.linear_model import LogisticRegression
from sklearn.svm import OneClassSVM

from scarce.errors import ScarceError
from scarce.rulers import (
    LLM_FAMILIES,
    VISION_RULERS,
    RulerFitWarning,
    available_rulers,
    make_ruler,
    percentile_threshold,
    register_ruler,
    ruler_spec,
)
from scarce.rulers.registry import _REGISTRY

ALL_RULERS = available_rulers()
N_GOOD, N_BAD, DIM = 300, 150, 5
BAD_SHIFT = np.array([3.0, 1.0, 0.0, 0.0, 0.0])


def _data(seed: int = 0, n_good: int = N_GOOD, n_bad: int = N_BAD, shift=BAD_SHIFT):
    rng = np.random.default_rng(seed)
    d = len(shift)
    Z = np.vstack([rng.standard_normal((n_good, d)), rng.standard_normal((n_bad, d)) + shift])
    y = np.r_[np.zeros(n_good, dtype=int), np.ones(n_bad, dtype=int)]
    return Z, y


def _seeded(name: str, **params):
    ruler = make_ruler(name, **params)
    if "random_state" in ruler.get_params():
        ruler.set_params(random_state=0)
    return ruler


@pytest.fixture(scope="module")
def data():
    return _data()


@pytest.fixture(scope="module")
def fitted(data):
    Z, y = data
    return {name: _seeded(name).fit(Z, y) for name in ALL_RULERS}


# -- registry -------------------------------------------------------------------------------------
def test_registry_holds_the_papers_catalogues():
    assert len(VISION_RULERS) == 13 and set(VISION_RULERS) == set(available_rulers("vision"))
    llm = set(available_rulers("llm"))
    for family in LLM_FAMILIES:
        assert family in llm
        assert {f"{family}_p{p}" for p in (50, 75, 90, 95)} <= llm
    # the paper's 13 + 30, the 5 names both share, and the boundary ruler, which is in neither catalogue
    assert len(llm) == 30 and len(ALL_RULERS) == 42
    assert set(ALL_RULERS) - set(VISION_RULERS) - llm == {"boundary"}


def test_unknown_ruler_name_suggests_and_lists():
    with pytest.raises(ScarceError, match="Did you mean 'mah_bad'") as info:
        make_ruler("mah_bda")
    assert isinstance(info.value, ValueError)
    assert "ocsvm_contrast" in str(info.value)  # the catalogue is listed


def test_unknown_ruler_parameter_lists_allowed():
    with pytest.raises(ValueError, match="allowed parameters: angle, percentile, random_state"):
        make_ruler("centroid_rot_030deg", anlge=30)


def test_register_custom_ruler_and_refuse_duplicates():
    from scarce.rulers import CentroidRuler

    try:
        register_ruler("my_centroid_p60", CentroidRuler, family="centroid", percentile=60)
        assert make_ruler("my_centroid_p60").percentile == 60
        with pytest.raises(ValueError, match="already registered"):
            register_ruler("my_centroid_p60", CentroidRuler)
    finally:
        _REGISTRY.pop("my_centroid_p60", None)


def test_importing_the_registry_does_not_import_sklearn():
    code = "import sys, scarce.rulers as r; r.available_rulers(); print('sklearn' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# -- the contract itself runs in tests/contract/test_contracts.py (scarce.testing.check_ruler) ---------------
@pytest.mark.parametrize("name", ALL_RULERS)
def test_orientation_is_strict_except_for_the_rotations_at_90_degrees(name, fitted, data):
    """Moving from the good centroid toward the bad centroid raises the score strictly.

    The public contract asks only "never decreases": by the paper's definition the rotation
    rulers at 90 degrees score along an axis orthogonal to the in-plane part of the centroid
    direction, so their rise is ``||mu_b - mu_g|| * ||d_perp||^2`` (>= 0, possibly ~0).
    """
    Z, y = data
    t = np.linspace(0.0, 1.0, 11)[:, None]
    path = Z[y == 0].mean(axis=0) + t * (Z[y == 1].mean(axis=0) - Z[y == 0].mean(axis=0))
    steps = np.diff(fitted[name].score_samples(path))
    angle = fitted[name].get_params().get("angle")
    if angle is None or abs(angle) < 90:
        assert np.all(steps > 0), steps


# -- thresholds -----------------------------------------------------------------------------------
def test_percentile_threshold_definition_with_ties():
    s = [1.0, 1.0, 1.0, 1.0, 2.0]
    assert percentile_threshold(s, 50) == 1.0      # 3rd largest; 100 % of scores >= 1
    assert percentile_threshold(s, 80) == 2.0      # exactly 20 % >= 2
    assert percentile_threshold(s, 81) == 2.0
    assert percentile_threshold(s, 79) == 1.0      # 21 % needed: 2 alone gives only 20 %
    assert percentile_threshold(np.arange(100.0), 90) == 90.0  # 10 of 100 scores >= 90


def test_fit_rejects_a_bad_default_percentile(data):
    with pytest.raises(ValueError, match=r"percentile must be in \(0, 100\), got 120"):
        make_ruler("pc1", percentile=120).fit(*data)


def test_fit_rejects_labels_outside_zero_one(data):
    Z, y = data
    with pytest.raises(ValueError, match=r"y must hold labels 1 .* got values \[0, 2\]"):
        make_ruler("centroid").fit(Z, 2 * y)
    with pytest.raises(ValueError, match="450 labels"):
        make_ruler("centroid").fit(Z, y[:-1])


# -- linear families ------------------------------------------------------------------------------
def test_centroid_offset_is_the_midpoint(data):
    Z, y = data
    ruler = make_ruler("centroid").fit(Z, y)
    mu_b, mu_g = Z[y == 1].mean(0), Z[y == 0].mean(0)
    gap = np.linalg.norm(mu_b - mu_g)
    np.testing.assert_allclose(ruler.score_samples(np.vstack([mu_b, mu_g])), [gap / 2, -gap / 2])
    np.testing.assert_allclose(ruler.direction_, (mu_b - mu_g) / gap)


def test_centroid_rejects_coincident_centroids():
    Z = np.array([[0.0, 1.0], [0.0, -1.0], [1.0, 0.0], [-1.0, 0.0]])
    with pytest.raises(ValueError, match="centroids coincide"):
        make_ruler("centroid").fit(Z, [0, 0, 1, 1])


@pytest.mark.parametrize("sign", [1.0, -1.0])  # -1: PCA's own signs give alpha, beta < 0
@pytest.mark.parametrize("angle", [0, 15, 30, 45, 60, 90, 135, -30])
def test_rotation_formula_and_sign_convention(angle, sign):
    Z, y = _data(seed=3, shift=sign * np.array([2.0, 1.0, 1.0, 0.5, 0.0]))
    ruler = make_ruler("centroid_rot_000deg", angle=float(angle)).fit(Z, y)
    a, b = ruler.plane_
    alpha, beta = ruler.plane_coordinates_
    d_c, d_t = ruler.centroid_direction_, ruler.direction_
    assert alpha >= 0 and beta >= 0
    pca = PCA(n_components=2).fit(Z)
    np.testing.assert_allclose(np.abs(ruler.plane_), np.abs(pca.components_), atol=1e-12)
    t = np.radians(angle)
    d_perp = d_c - alpha * a - beta * b
    expected = ((alpha * np.cos(t) - beta * np.sin(t)) * a
                + (alpha * np.sin(t) + beta * np.cos(t)) * b + d_perp)
    np.testing.assert_allclose(d_t, expected, atol=1e-12)
    assert np.linalg.norm(d_t) == pytest.approx(1.0)
    assert d_t @ d_c == pytest.approx(np.cos(t) * (alpha**2 + beta**2) + d_perp @ d_perp)
    # positive angles turn the in-plane part from a toward b: its angle in the (a, b) frame grows
    phi0, phi = np.arctan2(beta, alpha), np.arctan2(d_t @ b, d_t @ a)
    assert np.angle(np.exp(1j * (phi - phi0))) == pytest.approx(t)


def test_rotation_by_90_in_the_pca_plane_is_blind_to_the_centroid_axis():
    Z, y = _data(seed=4, shift=np.array([3.0, 0.5]))  # d = 2: d_perp = 0
    ruler = make_ruler("centroid_rot_090deg").fit(Z, y)
    mus = np.vstack([Z[y == 0].mean(0), Z[y == 1].mean(0)])
    s = ruler.score_samples(mus)
    assert s[1] - s[0] == pytest.approx(0.0, abs=1e-9)
    assert make_ruler("centroid_rot_000deg").fit(Z, y).score_samples(mus)[1] > s[1]


def test_pc1_is_the_oriented_first_component(data):
    Z, y = data
    ruler = make_ruler("pc1").fit(Z, y)
    v1 = PCA(n_components=1).fit(Z).components_[0]
    np.testing.assert_allclose(np.abs(ruler.component_), np.abs(v1), atol=1e-12)
    assert (Z[y == 1].mean(0) - Z[y == 0].mean(0)) @ ruler.component_ > 0
    np.testing.assert_allclose(ruler.score_samples(Z), (Z - Z.mean(0)) @ ruler.component_)
    bad_only = make_ruler("pc1", population="bad").fit(Z, y)
    np.testing.assert_allclose(bad_only.mean_, Z[y == 1].mean(0))


def test_pc1_warns_when_orientation_is_undefined():
    Z = np.array([[-3.0, -1.0], [3.0, -1.0], [-3.0, 1.0], [3.0, 1.0]])  # PC1 = x, classes differ in y
    with pytest.warns(RulerFitWarning, match="orientation"):
        make_ruler("pc1").fit(Z, [0, 0, 1, 1])


def test_fisher_solves_the_ridge_system(data):
    Z, y = data
    ruler = make_ruler("fisher", ridge=0.1).fit(Z, y)
    zb, zg = Z[y == 1], Z[y == 0]
    s_w = ((len(zb) - 1) * np.cov(zb.T) + (len(zg) - 1) * np.cov(zg.T)) / (len(Z) - 2)
    lam = 0.1 * np.trace(s_w) / Z.shape[1]
    w = np.linalg.solve(s_w + lam * np.eye(Z.shape[1]), zb.mean(0) - zg.mean(0))
    np.testing.assert_allclose(ruler.coef_, w, rtol=1e-10)
    np.testing.assert_allclose(ruler.score_samples(Z), (Z - Z.mean(0)) @ w, rtol=1e-9, atol=1e-12)
    with pytest.raises(ValueError, match=r"ridge must be in \(0, inf\], got 0"):
        make_ruler("fisher", ridge=0).fit(Z, y)


def test_logreg_is_the_classifier_decision_function(data):
    Z, y = data
    ruler = make_ruler("logreg", C=0.5).fit(Z, y)
    clf = LogisticRegression(C=0.5, max_iter=1000).fit(Z, y)
    np.testing.assert_allclose(ruler.score_samples(Z), clf.decision_function(Z), rtol=1e-6)


# -- Mahalanobis ----------------------------------------------------------------------------------
@pytest.mark.parametrize("covariance, estimator", [("ledoit_wolf", LedoitWolf), ("oas", OAS)])
def test_mahalanobis_anchorings(covariance, estimator, data):
    Z, y = data
    d_bad = np.sqrt(estimator().fit(Z[y == 1]).mahalanobis(Z))   # sklearn returns squared
    d_good = np.sqrt(estimator().fit(Z[y == 0]).mahalanobis(Z))
    for anchor, expected in [("bad", -d_bad), ("good", d_good), ("contrast", d_good - d_bad)]:
        ruler = make_ruler(f"mah_{anchor}", covariance=covariance).fit(Z, y)
        np.testing.assert_allclose(ruler.score_samples(Z), expected, rtol=1e-8)


def test_mahalanobis_floor_directions_detect_noise_dimensions():
    rng = np.random.default_rng(5)
    d, rank = 16, 3
    low_rank = rng.standard_normal((400, rank)) @ rng.standard_normal((rank, d)) + 3.0
    low_rank += 1e-4 * rng.standard_normal(low_rank.shape)
    Z = np.vstack([rng.standard_normal((400, d)), low_rank])
    y = np.r_[np.zeros(400), np.ones(400)]
    broken = make_ruler("mah_bad").fit(Z, y)
    assert broken.n_floor_directions_ == d - rank
    assert broken.condition_number_ > 100
    assert broken.diagnostics(Z, y)["n_floor_directions"] == d - rank
    spread = rng.standard_normal((4000, d)) * np.sqrt(np.arange(1, d + 1)) + 3.0
    healthy = make_ruler("mah_bad").fit(np.vstack([Z[:400], spread]), np.r_[np.zeros(400), np.ones(4000)])
    assert healthy.n_floor_directions_ == 0


def test_mahalanobis_warns_with_fewer_bad_samples_than_dimensions():
    Z, y = _data(seed=6, n_good=100, n_bad=4)
    with pytest.warns(RulerFitWarning, match=r"bad anchor has 4 samples for 5 dimensions") as rec:
        ruler = make_ruler("mah_bad").fit(Z, y)
    assert rec[0].filename == __file__       # attributed to the caller, not to scarce internals
    assert np.isfinite(ruler.score_samples(Z)).all()
    with pytest.raises(ValueError, match="at least 2 samples"):
        make_ruler("mah_bad").fit(Z[:101], y[:101])


def test_mahalanobis_rejects_bad_parameters(data):
    with pytest.raises(ValueError, match="covariance must be one of"):
        make_ruler("mah_bad", covariance="mcd").fit(*data)
    with pytest.raises(ValueError, match="anchor must be one of"):
        make_ruler("mah_bad", anchor="both").fit(*data)


# -- one-class SVM --------------------------------------------------------------------------------
def test_ocsvm_exact_matches_sklearn(data):
    Z, y = data
    ruler = make_ruler("ocsvm_contrast").fit(Z, y)
    assert ruler.solver_ == "exact"
    svm_bad = OneClassSVM(nu=0.1, gamma=ruler.models_["bad"].gamma).fit(Z[y == 1])
    svm_good = OneClassSVM(nu=0.1, gamma=ruler.models_["good"].gamma).fit(Z[y == 0])
    assert ruler.models_["bad"].gamma == pytest.approx(1 / (DIM * Z[y == 1].var()))
    expected = svm_bad.decision_function(Z) - svm_good.decision_function(Z)
    np.testing.assert_allclose(ruler.score_samples(Z), expected, rtol=1e-7, atol=1e-9)


def test_ocsvm_switches_to_nystroem_above_max_exact_samples(data):
    Z, y = data
    ruler = make_ruler("ocsvm_bad", max_exact_samples=100, n_components=50, random_state=0)
    ruler.fit(Z, y)
    assert ruler.solver_ == "nystroem"
    nystroem, sgd = ruler.models_["bad"].estimator
    expected = sgd.decision_function(nystroem.transform(Z))
    np.testing.assert_allclose(ruler.score_samples(Z), expected, rtol=1e-7, atol=1e-9)
    assert ruler.separation_auc_ > 0.9
    other_seed = clone(ruler).set_params(random_state=1).fit(Z, y)
    assert not np.array_equal(other_seed.score_samples(Z), ruler.score_samples(Z))


def test_ocsvm_rejects_bad_parameters(data):
    for params, match in [({"nu": 0}, "nu must be"), ({"gamma": "auto"}, "gamma must be"),
                          ({"max_exact_samples": 0}, "max_exact_samples must be")]:
        with pytest.raises(ValueError, match=match):
            make_ruler("ocsvm_bad", **params).fit(*data)


def test_no_warnings_on_clean_fits(data):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for name in ("centroid", "pc1", "mah_contrast", "ocsvm_contrast", "logreg", "fisher"):
            make_ruler(name).fit(*data)


def test_ruler_spec_exposes_family_and_defaults():
    spec = ruler_spec("centroid_rot90_p75")
    assert spec.family == "centroid_rotation" and dict(spec.params) == {"angle": 90.0, "percentile": 75}
    with pytest.raises(ScarceError):
        ruler_spec("pc2")
    with pytest.raises(ScarceError, match="catalogue"):
        available_rulers("audio")
