"""The offline stage of SCARCE on vision (paper Algorithm 1, "Offline"): labelled embeddings from
*training* seeds, a contrastive projection head and the fitted ruler catalogue.

Labelled data come from running classic (margin) Subset Simulation on training seeds and
recording every point the classifier evaluated: MCMC candidates at the upper levels are near or
inside the failure region, so failures, which are rare under the perturbation, are plentiful in
the record. The rulers are then fitted on the pooled embeddings of all training seeds (amortised:
the seeds that are evaluated later are never used here).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from scarce.applications.vision.problem import ForwardOutputs, VisionModel, margin, perturbation_problem
from scarce.errors import ScarceError, ScarceWarning
from scarce.estimators import SubsetSimulation
from scarce.seeding import SeedLike, as_generator

__all__ = ["HarvestedData", "PenultimateRuler", "fit_rulers", "harvest", "vulnerable_seeds"]


@dataclass
class HarvestedData:
    """Labelled head inputs pooled over training seeds.

    ``features``: (n, k) float32, the head inputs ``[penultimate, onehot(label)]``;
    ``failed``: (n,) bool; ``seed_index``: (n,) int, the training seed each row came from.
    """

    features: np.ndarray
    failed: np.ndarray
    seed_index: np.ndarray
    per_seed: list[dict[str, Any]] = field(default_factory=list)

    @property
    def n_failures(self) -> int:
        return int(self.failed.sum())

    def seed_labels(self, n_classes: int) -> np.ndarray:
        """True class of the seed each row came from, read from the one-hot part of the features."""
        return np.argmax(self.features[:, -n_classes:], axis=1)


class _Recorder:
    def __init__(self) -> None:
        self.features: list[np.ndarray] = []
        self.failed: list[np.ndarray] = []

    def __call__(self, out: ForwardOutputs, failed: np.ndarray) -> None:
        self.features.append(out.features)
        self.failed.append(np.asarray(failed, dtype=bool))


def vulnerable_seeds(model: VisionModel, images: np.ndarray, labels: np.ndarray, n: int) -> np.ndarray:
    """Indices of the ``n`` correctly classified images with the smallest clean logit gap.

    Those are the training seeds whose perturbations fail most often, so harvesting there yields
    failures at a small cost; one per class first, then by gap, to keep every class represented.
    """
    flat = np.asarray(images, dtype=np.float64).reshape(len(images), -1)
    outs = [model.forward(flat[i:i + 4096], 0) for i in range(0, len(flat), 4096)]
    logits = np.concatenate([out.logits for out in outs])  # a label-only model's: its surrogate's
    gaps = np.array([margin(logits[i:i + 1], int(labels[i]))[0] for i in range(len(flat))])
    correct = (np.concatenate([out.predicted() for out in outs]) == np.asarray(labels)) & (gaps < 0)
    order = [i for i in np.argsort(-gaps) if correct[i]]
    chosen: list[int] = []
    for cls in range(model.n_classes):
        for i in order:
            if labels[i] == cls:
                chosen.append(int(i))
                break
    chosen += [int(i) for i in order if i not in chosen]
    return np.array(chosen[:n], dtype=np.int64)


def harvest(
    model: VisionModel,
    images: np.ndarray,
    labels: np.ndarray,
    noise: Any,
    *,
    n_samples: int = 1000,
    max_queries: int = 20_000,
    max_normal_per_seed: int = 2000,
    seed: SeedLike = 0,
    score: str = "margin",
) -> HarvestedData:
    """Record labelled head inputs from margin Subset Simulation runs on training seeds.

    Parameters
    ----------
    model : VisionModel
    images, labels : the training seeds, (m, 28, 28) or (m, 784), and their labels
    noise : the perturbation of the application
    n_samples, max_queries : Subset Simulation size and query budget per training seed
    max_normal_per_seed : cap on the normal rows kept per seed (failures are all kept)
    seed : randomness of the runs and of the subsampling
    score : the levels' score, ``"margin"``; ``"surrogate_margin"`` for a label-only model,
        whose failures are still the target's labels
    """
    rng = as_generator(seed)
    flat = np.asarray(images, dtype=np.float64).reshape(len(images), -1)
    features, failed, origin, per_seed = [], [], [], []
    estimator = SubsetSimulation(n_samples=n_samples, max_queries=max_queries)
    for i, (image, label) in enumerate(zip(flat, labels)):
        recorder = _Recorder()
        problem = perturbation_problem(model, image, int(label), noise, score=score, record=recorder)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ScarceWarning)
            result = estimator.estimate(problem, seed=rng)
        f = np.concatenate(recorder.features)
        y = np.concatenate(recorder.failed)
        normal = np.flatnonzero(~y)
        if normal.size > max_normal_per_seed:
            normal = rng.choice(normal, size=max_normal_per_seed, replace=False)
        keep = np.sort(np.concatenate([np.flatnonzero(y), normal]))
        features.append(f[keep])
        failed.append(y[keep])
        origin.append(np.full(keep.size, i))
        per_seed.append({"index": i, "label": int(label), "probability": result.probability,
                         "n_failures": int(y.sum()), "n_queries": result.n_queries})
    return HarvestedData(np.concatenate(features), np.concatenate(failed), np.concatenate(origin), per_seed)


@dataclass(frozen=True)
class PenultimateRuler:
    """A fitted ruler that reads the classifier's penultimate features instead of the run's embedding.

    The vision problem scores its inputs with ``ruler.score_samples(features)`` (the head inputs
    without their one-hot class columns) when a score has ``reads == "penultimate"``. It is how
    a ruler of the decision boundary (:class:`~scarce.rulers.boundary.BoundaryRuler`) sits beside
    the catalogue's rulers on the contrastive head: the last layer of the network that made those
    features is linear in them, so its boundary is too.
    """

    ruler: Any
    reads = "penultimate"

    def for_group(self, group: Any) -> PenultimateRuler:
        """The ruler of one class (the same ruler when it is not conditioned)."""
        return PenultimateRuler(self.ruler.for_group(group)) if hasattr(self.ruler, "for_group") else self

    def score_samples(self, Z: Any, groups: Any = None) -> np.ndarray:
        """Scores of penultimate features, each with its group's ruler when groups are given."""
        if groups is None or not hasattr(self.ruler, "for_group"):
            return self.ruler.score_samples(Z)
        return self.ruler.score_samples(Z, groups=groups)

    @property
    def name(self) -> str:
        """The wrapped ruler's name (as a problem's name shows it)."""
        return str(getattr(self.ruler, "name", type(self.ruler).__name__))


def fit_rulers(
    names: list[str] | tuple[str, ...],
    embeddings: np.ndarray,
    failed: np.ndarray,
    *,
    min_failures: int = 20,
    seed: int = 0,
    groups: np.ndarray | None = None,
    by: str = "class",
    classes: np.ndarray | None = None,
    features: np.ndarray | None = None,
    feature_rulers: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Fit each named ruler on labelled embeddings; returns ``{name: fitted ruler}``.

    Pooled over every training seed, or, with ``groups`` (the true class of each row's seed),
    one ruler per group (:class:`~scarce.rulers.conditioned.ConditionedRuler`, labelled ``by``;
    a group with too few failures is scored by the pooled ruler, with a warning). A ruler that
    takes the groups itself (``takes_groups``, the boundary ruler) is fitted with ``groups``, or
    with ``classes`` when the others are pooled. The rulers named in ``feature_rulers`` are
    fitted on ``features`` (the penultimate features) and wrapped in :class:`PenultimateRuler`.

    Raises a :class:`ScarceError` when there are fewer than ``min_failures`` failures: the
    training seeds must be perturbed often enough to fail (raise the noise or add seeds).
    """
    from scarce.rulers import make_ruler

    failed = np.asarray(failed, dtype=bool)
    if failed.sum() < min_failures:
        raise ScarceError(
            f"the training seeds gave {int(failed.sum())} failure(s), fewer than min_failures="
            f"{min_failures} needed to fit rulers; use more training seeds or a stronger perturbation"
        )
    y = failed.astype(np.int64)
    rulers = {}
    for name in names:
        params = {"random_state": seed} if "random_state" in make_ruler(name).get_params() else {}
        on_features = name in feature_rulers
        if on_features and features is None:
            raise ScarceError(f"ruler {name!r} reads the penultimate features (feature_rulers), and none were given")
        Z = features if on_features else embeddings
        ruler = make_ruler(name, **params)
        if getattr(ruler, "takes_groups", False):
            own = groups if groups is not None else classes
            if own is None:
                raise ScarceError(f"ruler {name!r} is fitted with the class of every embedding; pass classes=")
            ruler.fit(Z, y, groups=own)
        elif groups is None:
            ruler.fit(Z, y)
        else:
            ruler = make_ruler(name, by=by, **params).fit(Z, y, groups=groups)
        rulers[name] = PenultimateRuler(ruler) if on_features else ruler
    return rulers
