"""How well a second-order response surface describes a score: the test behind response-surface sampling.

:class:`scarce.kernels.ResponseSurfaceSampling` moves a level's chains by independent draws
from the fitted level of ``m(u) = alpha + beta . u + kappa |u|^2``, and only where that level
agrees with the true one on held-out points (``recall x precision >= 0.9``). This script asks,
with far more points than a run has, whether the surface *could* describe a problem's levels,
so that a failed check reads as the score's shape and not as too few points:

* the held-out R^2 of the surface fitted by least squares to ``--samples`` independent draws
  of ``u ~ N(0, I)`` (fitted on one half, scored on the other);
* for the levels ``{score >= q}`` at the quantiles 0.9, 0.99 and 0.999 of those draws, the
  held-out ``recall x precision`` of a surface fitted, as the kernel fits it, to the points of
  the level below (all draws, then those above the 0.9 and the 0.99 quantile).

Rows: the quick vision preset's margin on the held-out seeds of a ``scarce vision`` run
directory (those with a Monte Carlo truth, rarest first), each competing class's logit difference ``l_c - l_y`` on the same draws (the
margin's failure set is the union of their positive sets), and, as a control where the surface
is exact, the benchmark suite's linear problem in d = 100.

    python benchmarks/surface_fit.py --run-dir runs/vision-quick --seeds 3 --samples 200000
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

#: The levels checked, as quantiles of the draws' scores; each is fitted on the points above the one before.
QUANTILES = (0.9, 0.99, 0.999)


def design(u: np.ndarray) -> np.ndarray:
    """Rows ``(1, u, |u|^2)``: the surface's least-squares design."""
    u = np.asarray(u, dtype=np.float64)
    return np.column_stack([np.ones(len(u)), u, np.einsum("ij,ij->i", u, u)])


def held_out_r2(x: np.ndarray, score: np.ndarray) -> float:
    """R^2 on the second half of the rows of the surface fitted to the first half."""
    half = len(score) // 2
    coef, *_ = np.linalg.lstsq(x[:half], score[:half], rcond=None)
    residual = score[half:] - x[half:] @ coef
    return float(1.0 - residual.var() / score[half:].var())


def level_agreement(x: np.ndarray, score: np.ndarray) -> list[float | None]:
    """Held-out ``recall x precision`` of the fitted level at each of :data:`QUANTILES`.

    The surface of the level at quantile ``q_i`` is fitted to the first half of the points
    above ``q_{i-1}`` (all points for the first) and checked on the second half, as the
    kernel fits a level's surface to the points of the level below it. A level whose fitting
    half holds fewer than ``6 (d + 2)`` points (what the kernel asks of all its points) gets
    None: the figure would measure the fit's own noise.
    """
    from scarce.kernels.response_surface import ROWS_PER_COEFFICIENT

    bounds = np.quantile(score, QUANTILES)
    below = -np.inf
    out = []
    for bound in bounds:
        rows = np.flatnonzero(score >= below)
        half = len(rows) // 2
        below = bound
        if half < ROWS_PER_COEFFICIENT * x.shape[1]:
            out.append(None)
            continue
        fit, check = rows[:half], rows[half:]
        coef, *_ = np.linalg.lstsq(x[fit], score[fit], rcond=None)
        fitted, level = x[check] @ coef >= bound, score[check] >= bound
        both = np.count_nonzero(fitted & level)
        out.append(both * both / (np.count_nonzero(level) * max(np.count_nonzero(fitted), 1)) if both else 0.0)
    return out


def print_row(name: str, x: np.ndarray, score: np.ndarray) -> None:
    agreement = " | ".join("-" if a is None else f"{a:.2f}" for a in level_agreement(x, score))
    print(f"| {name} | {held_out_r2(x, score):.3f} | {agreement} |", flush=True)


def vision_rows(args: argparse.Namespace, rng: np.random.Generator) -> None:
    """The margin and the logit differences of the run directory's rarest held-out seeds (ties by seed index)."""
    import torch

    from scarce.applications.vision.analysis import result_rows
    from scarce.applications.vision.pipeline import build_context
    from scarce.applications.vision.problem import margin
    from scarce.applications.vision.protocol import VisionRun, get_preset

    torch.set_num_threads(args.threads)
    preset = get_preset(args.preset)
    context = build_context(preset, args.run_dir, log=lambda *_: None, device="cpu")
    frame = result_rows(VisionRun(preset, Path(args.run_dir), context).store)
    truth = frame[frame.stage == "truth"].groupby("seed_index")["p_hat"].mean()
    if truth.empty:
        raise SystemExit(f"--run-dir {args.run_dir}: no held-out seed with a Monte Carlo truth yet (run `scarce "
                         f"vision` to the end first)")
    ranked = sorted((p, int(i)) for i, p in truth.items() if p > 0)
    dense = dict((i, p) for p, i in ranked)
    chosen = [i for _, i in ranked[:args.seeds]]
    for i in chosen:
        image, label = context.seed(i)
        u = rng.standard_normal((args.samples, int(getattr(context.noise, "latent_dim", image.size))))
        u = u.astype(np.float32)
        logits = np.concatenate([context.model.forward(context.noise.apply(image, u[lo:lo + 8192]), label,
                                                       embed=False).logits
                                 for lo in range(0, len(u), 8192)])
        x = design(u)
        print_row(f"seed {i} (p {dense[i]:.1e}), margin", x, margin(logits, label))
        for c in range(logits.shape[1]):
            if c != label:
                print_row(f"seed {i}, l_{c} - l_{label}", x, logits[:, c] - logits[:, label])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run-dir", default="runs/vision-quick", help="a `scarce vision` run directory")
    parser.add_argument("--preset", default="quick")
    parser.add_argument("--seeds", type=int, default=3, help="this many held-out seeds, rarest first")
    parser.add_argument("--samples", type=int, default=200_000, help="independent draws a problem")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    args = parser.parse_args()
    if args.samples < 20_000:
        parser.error(f"--samples must be at least 20000 (the 0.999 level needs points), got {args.samples}")
    if args.seeds < 1 or args.threads < 1:
        parser.error(f"--seeds and --threads must be at least 1, got {args.seeds} and {args.threads}")
    if not (Path(args.run_dir) / "config.json").is_file():
        parser.error(f"--run-dir {args.run_dir!r} is not a `scarce vision` run directory (no config.json)")
    rng = np.random.default_rng(args.seed)
    print("| score | held-out R^2 | agreement at q 0.9 | q 0.99 | q 0.999 |")
    print("|---|---|---|---|---|")
    u = rng.standard_normal((args.samples, 100))
    print_row("control: linear, d = 100", design(u), u.sum(axis=1) / 10.0)
    vision_rows(args, rng)


if __name__ == "__main__":
    main()
