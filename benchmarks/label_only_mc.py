"""Monte Carlo through a label-only target with the one-call API: one process, for paired timing.

``scarce.vision.failure_probability(surrogate, x, target=fn, score="none",
estimator=scarce.MonteCarlo(...))`` counts the target's misclassifications. The flags of the
built-in events are functions of the target's decisions, so no batch needs the surrogate's
pass. This script makes that call once, on two random CNNs of the MNIST shape (one as the target,
one as the surrogate), and prints the queries and failures; time two checkouts against each
other with ``farm-bench`` (the benchmark page gives the command).

    python benchmarks/label_only_mc.py --samples 40000
"""

from __future__ import annotations

import argparse
import warnings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=40_000, help="Monte Carlo samples")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    args = parser.parse_args()
    if args.samples < 1 or args.threads < 1:
        parser.error(f"--samples and --threads must be at least 1, got {args.samples} and {args.threads}")

    import numpy as np
    import torch

    import scarce
    import scarce.vision as sv

    warnings.simplefilter("ignore")
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)

    def cnn() -> torch.nn.Module:
        return torch.nn.Sequential(
            torch.nn.Conv2d(1, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Flatten(), torch.nn.Linear(32 * 49, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10)).eval()

    target, surrogate = cnn(), cnn()
    x = np.random.default_rng(0).uniform(size=(1, 28, 28))
    with torch.inference_mode():
        result = sv.failure_probability(surrogate, x, target=lambda b: target(b).argmax(1), score="none",
                                        scale=0.3, device="cpu", seed=1,
                                        estimator=scarce.MonteCarlo(n_samples=args.samples))
    print(f"queries {result.n_queries}, failures {result.n_failed}")


if __name__ == "__main__":
    main()
