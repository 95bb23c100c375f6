"""Do the rulers see failure on seeds they were not fitted on? Pooled against class-conditioned
rulers, on each encoder, on training seeds and on held-out (test-split) seeds.

For every encoder (the supervised-contrastive head and the classifier's penultimate features)
and both ways of fitting (one ruler pooled over every class, or one per class of the seed), the
vision pipeline fits the whole ruler catalogue on labelled embeddings harvested from training
seeds, and scores labelled embeddings harvested the same way from seeds of the test split. The
table gives, per ruler, the AUC of failure against normal (stratified by class for conditioned
rulers: only pairs of one class are compared, since each class has its own ruler) on the
training seeds and on the held-out seeds. One run directory holds the classifier and both
harvests, so every configuration sees the same data.

    python benchmarks/ruler_generalisation.py --run-dir runs/ruler-generalisation
    python benchmarks/ruler_generalisation.py --preset paper --data-dir ../shared/data/mnist --run-dir runs/paper-rulers
    python benchmarks/ruler_generalisation.py --access labels --run-dir runs/rulers-labels

The boundary ruler (``scarce.rulers.boundary``) reads the penultimate features in every
configuration and is one softmax over the classes in both fittings; it has one row.
"""

from __future__ import annotations

import argparse
import time
import warnings

from scarce.applications.vision.pipeline import build_context
from scarce.applications.vision.protocol import get_preset
from scarce.errors import ScarceWarning


def measure(preset_name: str, run_dir: str, data_dir: str | None, overrides: dict) -> list[dict]:
    """Rows ``{encoder, fitting, ruler, train, heldout}`` for every configuration."""
    rows = []
    for embedding in ("supcon", "penultimate"):
        for conditioning in ("none", "class"):
            preset = get_preset(preset_name, embedding=embedding, conditioning=conditioning, **overrides)
            start = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ScarceWarning)
                ctx = build_context(preset, run_dir, data_dir=data_dir, log=lambda *_: None)
            train, held = ctx.info["ruler_auc_train"], ctx.info["ruler_auc_heldout"]
            fitting = "per class" if conditioning == "class" else "pooled"
            print(f"  {embedding:11s} {fitting:9s} fitted and scored in {time.perf_counter() - start:.0f} s", flush=True)
            # a feature ruler (the boundary ruler) reads the penultimate features whatever the run's
            # embedding: it is listed once, under that encoder, and is per class in both fittings
            rows += [{"encoder": embedding, "fitting": fitting, "ruler": name, "train": train[name],
                      "heldout": held.get(name, float("nan"))} for name in train
                     if name not in preset.feature_rulers or embedding == "penultimate"]
    return rows


def print_table(rows: list[dict]) -> None:
    """One line per encoder and ruler: training and held-out AUC, pooled and per class."""
    cells = {(r["encoder"], r["ruler"], r["fitting"]): r for r in rows}
    print("\n| encoder | ruler | train AUC, pooled | train AUC, per class | held-out AUC, pooled "
          "| held-out AUC, per class |")
    print("|---|---|---|---|---|---|")
    for encoder in ("supcon", "penultimate"):
        names = sorted({r["ruler"] for r in rows if r["encoder"] == encoder},
                       key=lambda n: -cells[(encoder, n, "per class")]["heldout"])
        for name in names:
            p, c = cells[(encoder, name, "pooled")], cells[(encoder, name, "per class")]
            print(f"| {encoder} | {name} | {p['train']:.3f} | {c['train']:.3f} | {p['heldout']:.3f} | {c['heldout']:.3f} |")
    for fitting in ("pooled", "per class"):
        best = max((r for r in rows if r["fitting"] == fitting), key=lambda r: r["heldout"])
        below = sum(r["heldout"] < 0.5 for r in rows if r["fitting"] == fitting)
        print(f"\n{fitting}: best held-out AUC {best['heldout']:.3f} ({best['encoder']}, {best['ruler']}); "
              f"{below} of {sum(r['fitting'] == fitting for r in rows)} ruler-encoder pairs below 0.5")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run-dir", default="runs/ruler-generalisation")
    parser.add_argument("--preset", default="quick")
    parser.add_argument("--data-dir", default=None, help="MNIST IDX directory (preset paper)")
    parser.add_argument("--train-seeds", type=int, default=None, help="override n_train_seeds")
    parser.add_argument("--access", default="logits", choices=("logits", "labels"),
                        help="labels: rulers on a surrogate network's features, failures from the target's labels")
    args = parser.parse_args()
    overrides = {} if args.train_seeds is None else {"n_train_seeds": args.train_seeds}
    if args.access != "logits":
        overrides["access"] = args.access
    print(f"preset {args.preset}, run directory {args.run_dir}" + (f", {overrides}" if overrides else ""))
    print_table(measure(args.preset, args.run_dir, args.data_dir, overrides))


if __name__ == "__main__":
    main()
