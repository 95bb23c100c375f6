"""Resource bounds of a vision run, estimated from its preset before any work starts.

A preset names every size of a run (classifier widths, Monte Carlo samples, seeds per stage,
training epochs), so its peak memory, its number of model queries and its training work follow
from the preset alone. A run beyond :data:`MAX_MEMORY_BYTES`, :data:`MAX_QUERIES` or
:data:`MAX_TRAINING_PASSES` is refused with the estimate and the setting that dominates it,
unless the preset sets ``allow_large=True`` (``--set allow_large=true``): a typo such as
``conv1_channels=100000``, ``smc_samples=1e9`` or ``classifier.epochs=1e9`` is an error in a
second, not a process the kernel kills after an hour. The estimates are upper bounds (every
Subset Simulation run is counted as if it used all ``max_levels`` levels).
"""

from __future__ import annotations

from typing import Any

from scarce.errors import ScarceError

__all__ = ["MAX_MEMORY_BYTES", "MAX_QUERIES", "MAX_TRAINING_PASSES", "check_resources", "estimate_resources"]

#: Largest estimated peak memory of a run without ``allow_large`` (8 GiB).
MAX_MEMORY_BYTES = 8 << 30
#: Largest estimated number of model queries (forward passes of one image) without ``allow_large``.
MAX_QUERIES = 2_000_000_000
#: Largest estimated training work without ``allow_large``, in image passes (a training step's
#: forward and backward pass over one image counted as three forward passes): the query bound's
#: unit, so training may cost what the queries may.
MAX_TRAINING_PASSES = MAX_QUERIES
#: Seed-pool sizes of the two data sources (:func:`scarce.datasets.load_mnist` defaults).
SEED_POOL = {"embedded": 500, "mnist": 1000}
#: Images per forward pass on CPU (:class:`~scarce.applications.vision.problem.VisionModel`).
_FORWARD_BATCH = 256
_FLOAT = 4
#: Training images of the two data sources (the surrogate trains on them beside its copies).
_TRAIN_IMAGES = {"embedded": 3500, "mnist": 60_000}
_PIXELS = 28 * 28
#: Latent-sized float64 arrays a Subset Simulation or AMLS level keeps alive (states, candidates,
#: transformed inputs, proposals and their scratch copies).
_ARRAYS_PER_LEVEL = 8


def _classifier_bytes(classifier: dict[str, Any]) -> dict[str, int]:
    """Training and inference memory of the SmallCNN of these settings (weights and activations)."""
    c1, c2 = int(classifier["conv1_channels"]), int(classifier["conv2_channels"])
    hidden, batch = int(classifier["hidden"]), int(classifier["batch_size"])
    params = 10 * c1 + 9 * c1 * c2 + c2 + 49 * c2 * hidden + hidden + 10 * hidden + 10
    # per image: conv1 and its ReLU (28x28), pooled (14x14), conv2 and ReLU (14x14), pooled (7x7)
    activations = 2 * _PIXELS * c1 + 196 * c1 + 2 * 196 * c2 + 49 * c2 + 2 * hidden + 10
    return {"parameters": params,
            "train": _FLOAT * (4 * params + 2 * batch * activations),  # weights, grads, AdamW; fwd + bwd
            "forward": _FLOAT * (params + _FORWARD_BATCH * activations)}


def _training_passes(classifier: dict[str, Any], images: int) -> int:
    """Image passes of :func:`~scarce.applications.vision.classifier.train_classifier` on ``images``:
    it runs ``max(epochs, ceil(min_steps / ceil(images / batch_size)))`` whole epochs, and each
    image seen costs three passes (forward and backward)."""
    steps_per_epoch = -(-images // max(int(classifier["batch_size"]), 1))
    epochs = max(int(classifier["epochs"]), -(-int(classifier["min_steps"]) // max(steps_per_epoch, 1)))
    return 3 * epochs * images


def _ss_queries(samples: int, levels: int) -> int:
    return samples * (levels + 1)


def estimate_resources(preset: Any) -> dict[str, Any]:
    """Upper bounds of a preset's peak memory (bytes) and model queries, with their parts.

    Returns
    -------
    dict
        ``memory``, ``queries`` and ``training`` (the totals), ``memory_parts``,
        ``query_parts`` and ``training_parts`` (by stage), and ``parameters`` (of the classifier).
    """
    from dataclasses import fields

    from scarce.applications.vision.classifier import ClassifierConfig

    classifier = {f.name: f.default for f in fields(ClassifierConfig)} | dict(preset.classifier)
    net = _classifier_bytes(classifier)
    m = preset.methods
    candidates = min(int(preset.n_candidates), SEED_POOL.get(preset.data, 1000))
    ss = _ss_queries(int(m.ss_samples), int(m.max_levels))
    amls = int(m.amls_samples) * (1 + int(m.max_levels) * int(m.amls_steps))
    harvest_seeds = int(preset.n_train_seeds) + max(2, int(preset.n_train_seeds) // 4)
    labels_only = getattr(preset, "access", "logits") == "labels"
    distill = int(getattr(preset, "surrogate_queries", 0)) if labels_only else 0
    queries = {
        "smc (n_candidates x methods.smc_samples)": candidates * int(m.smc_samples),
        "harvest (n_train_seeds x harvest_max_queries)": harvest_seeds * int(preset.harvest_max_queries),
        "screen (n_screen x rulers x Subset Simulation)": int(preset.n_screen) * len(preset.rulers) * ss,
        "eval (n_eval x n_runs x ((top_k + 1) x Subset Simulation + AMLS))":
            int(preset.n_eval) * int(preset.n_runs) * ((int(preset.top_k) + 1) * ss + amls),
        "held-out truth (n_eval x truth_samples)": int(preset.n_eval) * int(preset.truth_samples),
        "surrogate training data (surrogate_queries)": distill,
    }
    feature_width = int(classifier["hidden"]) + 10
    latent = 8 * _PIXELS * _ARRAYS_PER_LEVEL
    memory = {
        "classifier training (classifier.* widths and batch_size)": net["train"],
        "forward passes (classifier.* widths)": net["forward"],
        "Monte Carlo batch (methods.smc_batch)": int(m.smc_batch) * 3 * 8 * _PIXELS,
        "Subset Simulation levels (methods.ss_samples, harvest_samples)":
            max(int(m.ss_samples), int(preset.harvest_samples)) * latent,
        "AMLS levels (methods.amls_samples)": int(m.amls_samples) * latent,
        "harvested features (n_train_seeds x harvest_max_queries)":
            harvest_seeds * int(preset.harvest_max_queries) * feature_width * 8,
        # the copies, their concatenation with the training set, its tensor and the finiteness check
        "surrogate training data (surrogate_queries)":
            (distill + _TRAIN_IMAGES.get(preset.data, 60_000)) * _PIXELS * 5 * _FLOAT if distill else 0,
    }
    train_images = _TRAIN_IMAGES.get(preset.data, 60_000)
    training = {
        "classifier training (classifier.epochs, min_steps, batch_size)": _training_passes(classifier, train_images),
        "surrogate training (classifier.epochs on surrogate_queries and the training set)":
            _training_passes(classifier, train_images + distill) if labels_only else 0,
    }
    return {"memory": sum(memory.values()), "queries": sum(queries.values()), "training": sum(training.values()),
            "memory_parts": memory, "query_parts": queries, "training_parts": training,
            "parameters": net["parameters"]}


def _gib(value: float) -> str:
    return f"{value / (1 << 30):.3g} GiB of memory"


def _count(value: float) -> str:
    return f"{value:.3g} model queries"


def _passes(value: float) -> str:
    return f"{value:.3g} image passes of training"


def check_resources(preset: Any) -> dict[str, Any]:
    """The estimate of :func:`estimate_resources`; a ScarceError when a bound is exceeded.

    The message gives the estimate, the bound, the largest contribution (the setting to lower)
    and the override, ``allow_large=true``.
    """
    estimate = estimate_resources(preset)
    if getattr(preset, "allow_large", False):
        return estimate
    for kind, part_key, bound, show in (("memory", "memory_parts", MAX_MEMORY_BYTES, _gib),
                                        ("queries", "query_parts", MAX_QUERIES, _count),
                                        ("training", "training_parts", MAX_TRAINING_PASSES, _passes)):
        total = estimate[kind]
        if total > bound:
            parts = estimate[part_key]
            worst = max(parts, key=parts.get)
            raise ScarceError(
                f"this vision configuration needs an estimated {show(total)}, above the bound "
                f"of {show(bound)}; most of it from {worst}: {show(parts[worst])}. Lower that setting, "
                f"or pass --set allow_large=true to run it anyway")
    return estimate
