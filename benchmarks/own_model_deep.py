"""Error bars of the one call on a small digits classifier at very rare events, with and without clipped inputs.

Trains a 64 -> 64 -> 10 MLP (dropout 0.2) on the first 1,500 of scikit-learn's 8 x 8 digits
(pixels in [0, 1], 200 full-batch Adam steps, seed 0), takes the held-out digit whose logit margin
is the median of the held-out ones, and runs ``scarce.vision.failure_probability`` on it with
Gaussian noise of ``--scale`` for seeds ``100 .. 100 + reps - 1``, clipped to [0, 1] (the
default) and not. The truth is unknown at these probabilities, so each row prints what the runs
say of each other: the spread of ``log P_hat`` over the runs against the root mean square of the
log-variance they report (``log(1 + CoV^2)``), and the most intervals that share one point (if
every interval held the truth with probability 0.95, about 95% of them would share it).
With ``--reference N,RUNS`` each clipped row at ``--scale`` and each ``--deeper`` row also counts the
intervals that hold the mean of ``RUNS`` runs at ``N`` of its own setting (seeds 5000 on), and
with ``--pool R,...`` also how its runs' variances follow their estimates and how often ``R`` of
its runs pooled hold that reference.

    python benchmarks/own_model_deep.py --scale 0.07 --reps 60 --cov-depth 50,all --deeper 0.05,0.045 \
        --reference 20000,12
    python benchmarks/own_model_deep.py --scale 0.07 --reps 300 --n-samples 2000 --deeper 0.05,0.045 \
        --reference 20000,12 --pool 3,5,10
"""

from __future__ import annotations

import argparse
import math
import warnings

import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=0.07)
    parser.add_argument("--reps", type=int, default=60)
    parser.add_argument("--n-samples", default="2000,8000", help="Subset Simulation's N, comma-separated")
    parser.add_argument("--cov-depth", default="", help="also run with these cov_depth values (comma-separated integers, 'all' or 'auto')")
    parser.add_argument("--reference", default="", metavar="N,RUNS",
                        help="at --scale, clipped, and at each --deeper scale, unclipped: the mean of RUNS runs at N "
                             "(seeds 5000 on) as a reference value, and each row of that setting prints how many of "
                             "its intervals hold it")
    parser.add_argument("--deeper", default="", help="noise scales (comma-separated) also run unclipped at the first N, "
                                                     "with the default and each --cov-depth: rarer events in more levels")
    parser.add_argument("--pool", default="", metavar="R,R,...",
                        help="with --reference: also print, for each R, how often R of a row's runs pooled (the mean of "
                             "their estimates, their standard errors added in quadrature) hold the reference, over "
                             "4,000 random sets of R runs (seeded)")
    args = parser.parse_args()
    import torch

    import scarce
    from scarce.vision import failure_probability

    torch.set_num_threads(1)
    model, x0 = _model_and_input(torch)
    first = int(args.n_samples.split(",")[0])
    settings = [(args.scale, clip, n, None) for clip in ((0.0, 1.0), None) for n in map(int, args.n_samples.split(","))]
    depths = [depth if depth in ("all", "auto") else int(depth) for depth in filter(None, args.cov_depth.split(","))]
    settings += [(args.scale, (0.0, 1.0), first, depth) for depth in depths]
    settings += [(float(scale), None, first, depth) for scale in args.deeper.split(",") if scale
                 for depth in [None, *depths]]
    # the clipped setting at --scale and the unclipped --deeper ones (not the unclipped --scale rows)
    kept = sorted({(scale, clip) for scale, clip, _, _ in settings if clip is not None or scale != args.scale}, key=str)
    references = {key: _reference(model, x0, *key, args.reference, failure_probability, scarce) for key in kept}
    print(f"{'scale':>5s} {'clip':10s} {'N':>5s} {'cov_depth':>9s} {'median P':>9s} {'levels':>6s} {'obs. log sd':>11s} "
          f"{'rep. log sd':>11s} {'rep/obs':>7s} {'most sharing one point':>22s}")
    for scale, clip, n, depth in settings:
        estimator = scarce.SubsetSimulation(n_samples=n, **({} if depth is None else {"cov_depth": depth}))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            runs = [failure_probability(model, x0, scale=scale, clip=clip, estimator=estimator, seed=100 + s,
                                        device="cpu") for s in range(args.reps)]
        print(f"{scale:5.3g} ", end="")
        _row(runs, clip, n, depth, references.get((scale, clip)))
        if args.pool and references.get((scale, clip)) is not None:
            _pooled(runs, references[(scale, clip)], [int(r) for r in args.pool.split(",")])


def _reference(model, x0, scale: float, clip: tuple[float, float] | None, spec: str,  # type: ignore[no-untyped-def]
               failure_probability, scarce) -> float | None:
    """The mean estimate of ``RUNS`` runs at ``N`` (``spec = "N,RUNS"``) at ``scale`` and ``clip``, printed
    with its CoV; None without."""
    if not spec:
        return None
    n, count = (int(v) for v in spec.split(","))
    estimator = scarce.SubsetSimulation(n_samples=n)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p = np.array([failure_probability(model, x0, scale=scale, clip=clip, estimator=estimator, seed=5000 + s,
                                          device="cpu").probability for s in range(count)])
    print(f"reference at scale {scale:g}, clip {clip}: the mean of {count} runs at N = {n}: {p.mean():.4g} "
          f"(its CoV {p.std(ddof=1) / p.mean() / math.sqrt(count):.3f})", flush=True)
    return float(p.mean())


def _model_and_input(torch):  # type: ignore[no-untyped-def]
    """The trained MLP (eval mode) and the held-out digit of median margin."""
    from sklearn.datasets import load_digits

    images, labels = load_digits(return_X_y=True)
    images = (images / 16.0).astype(np.float32)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Dropout(0.2), torch.nn.Linear(64, 10))
    optimiser = torch.optim.Adam(model.parameters(), 1e-2)
    train, target = torch.tensor(images[:1500]), torch.tensor(labels[:1500])
    for _ in range(200):
        optimiser.zero_grad()
        torch.nn.functional.cross_entropy(model(train), target).backward()
        optimiser.step()
    model.eval()
    with torch.no_grad():
        logits = model(torch.tensor(images[1500:])).numpy()
    held = labels[1500:]
    rows = np.arange(held.size)
    others = np.where(np.arange(10)[None] == held[:, None], -np.inf, logits).max(1)
    margin = logits[rows, held] - others
    return model, images[1500 + int(np.argsort(np.abs(margin - np.median(margin)))[0])]


def _row(runs: list, clip: tuple[float, float] | None, n: int, depth: int | str | None, reference: float | None) -> None:
    """One line of the table: the runs' spread against what they report, and their intervals' overlap."""
    p = np.array([r.probability for r in runs])
    cov = np.array([r.cov for r in runs])
    ci = np.array([r.ci(0.95) for r in runs])
    ends = np.concatenate([ci[:, 0], ci[:, 1]])
    shared = max(int(((ci[:, 0] <= e) & (e <= ci[:, 1])).sum()) for e in ends)
    observed = float(np.log(p[p > 0]).std()) if (p > 0).all() else math.nan
    reported = math.sqrt(float(np.mean(np.log1p(cov * cov))))
    levels = float(np.median([len(r.levels) for r in runs]))
    print(f"{str(clip):10s} {n:5d} {str(depth or '-'):>9s} {np.median(p):9.3g} {levels:6.0f} {observed:11.3f} "
          f"{reported:11.3f} {reported / observed:7.2f} {shared:>18d}/{len(runs)}", end="")
    if reference is not None:
        held = int(((ci[:, 0] <= reference) & (reference <= ci[:, 1])).sum())
        print(f"  hold the reference: {held}/{len(runs)}, it lies above {int((reference > ci[:, 1]).sum())} and "
              f"below {int((reference < ci[:, 0]).sum())}", end="")
    print(flush=True)


def _pooled(runs: list, reference: float, sizes: list[int]) -> None:
    """How the runs' own variances relate to their estimates, and how pooled runs hold the reference.

    Prints the correlation of ``log P_hat`` with the reported log-variance ``log(1 + CoV^2)``
    (an honest run's variance does not follow its estimate); the share of runs whose interval
    would hold the reference had each reported the observed log-variance of all the runs (what
    the interval's form gives with a perfect variance); the median ratio of one run's interval
    ends; and, for each ``R``, over 4,000 random sets of ``R`` runs (seeded; overlapping, so the
    shares vary by about 0.02 with the runs drawn): the share whose pooled result
    (:func:`scarce.pool_results`) has a 95% interval holding the reference, the median ratio of
    its ends and its median degrees of freedom, and the share whose Student interval from the
    runs' own spread (``mean +- t s / sqrt(R)``, ``R - 1`` degrees of freedom) holds it. A row
    with a run that did not reach the failure, carries thin evidence or measured no error prints
    only that: leaving such runs out would bias the pool.
    """
    from scipy import stats

    from scarce import pool_results
    from scarce.envelope import lognormal_interval

    if any(not r.reached_failure or r.thin_evidence or not r.probability > 0.0 or not math.isfinite(r.cov)
           for r in runs):
        print("      not pooled: some runs did not reach the failure, carry thin evidence or have no measured error",
              flush=True)
        return
    p = np.array([r.probability for r in runs])
    cov = np.array([r.cov for r in runs])
    observed = float(np.log(p).var())
    oracle = np.mean([lo <= reference <= hi for lo, hi in
                      (lognormal_interval(x, math.sqrt(math.expm1(observed))) for x in p)])
    width = np.median([hi / lo for lo, hi in (r.ci(0.95) for r in runs)])
    print(f"      corr(log P, reported log-variance) {np.corrcoef(np.log(p), np.log1p(cov * cov))[0, 1]:.2f}; with the "
          f"observed log-variance {observed:.3f} every run would hold the reference in {oracle:.3f}; one run's "
          f"interval: ends {width:.3g} apart (median ratio)", end="")
    rng = np.random.default_rng(2026)
    for size in sizes:
        held, spread, ratios, dofs = 0, 0, [], []
        for _ in range(4000):
            pick = rng.choice(p.size, size, replace=False)
            pooled = pool_results([runs[i] for i in pick])
            lo, hi = pooled.ci(0.95)
            held += lo <= reference <= hi
            ratios.append(hi / lo)
            dofs.append(pooled.degrees_of_freedom() or math.inf)
            spread += abs(pooled.probability - reference) <= (stats.t.ppf(0.975, size - 1) * p[pick].std(ddof=1)
                                                              / math.sqrt(size))
        print(f"; {size} pooled: {held / 4000:.3f}, ends {np.median(ratios):.3g} apart, {np.median(dofs):.3g} degrees "
              f"of freedom (Student from their spread: {spread / 4000:.3f})", end="")
    print(flush=True)


if __name__ == "__main__":
    main()
