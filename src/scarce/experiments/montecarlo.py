r"""Monte Carlo ground truth for huge budgets: chunked map-reduce with per-chunk checkpoints.

A budget of :math:`N` samples is cut into chunks of ``chunk_size``; chunk :math:`c` draws its
samples from the :math:`c`-th child of ``SeedSequence(seed).spawn``, so the total is the same
whichever executor runs the chunks and in whatever order, and a chunk's seed does not depend on
the total budget (raising ``n_samples`` later reuses the chunks already done). Each finished
chunk's counts are checkpointed in a :class:`~scarce.experiments.store.ResultStore`; an
interrupted run resumes with the chunks not stored yet. A checkpoint directory is tied to
everything that determines the numbers: the problem (its name, dimension and a fingerprint of
its outputs on a fixed probe batch), the seed, ``chunk_size``, ``batch_size`` and ``dtype``; a
stored chunk is reused only when its recorded sample count is the count this run needs for it
(a partial last chunk of a smaller budget is recomputed as a full one). The reduce step sums failures:
:math:`\hat P = \sum_c K_c / \sum_c n_c`, with the exact Clopper-Pearson interval of
:class:`~scarce.estimators.MonteCarlo` (the result is the same type).
"""

from __future__ import annotations

import functools
import hashlib
import math
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from scarce.checks import check_positive_int
from scarce.errors import ScarceError
from scarce.estimators.base import Estimator, build_result
from scarce.experiments.executors import Executor, SerialExecutor, run_grid
from scarce.experiments.store import ResultStore
from scarce.normals import check_dtype
from scarce.problem import RareEventProblem
from scarce.results import EstimateResult, LevelDiagnostics

__all__ = ["ChunkedMonteCarlo"]

_RESOLVED: list[tuple[Any, RareEventProblem]] = []


def _problem(shared: Any) -> RareEventProblem:
    """The problem itself, or built once per worker from a zero-argument factory."""
    if isinstance(shared, RareEventProblem):
        return shared
    for source, problem in _RESOLVED:
        if source is shared:
            return problem
    problem = shared()
    if not isinstance(problem, RareEventProblem):
        raise ScarceError(f"the problem factory must return a RareEventProblem, got {type(problem).__name__}")
    _RESOLVED.append((shared, problem))
    return problem


def _factory_name(factory: Any) -> str:
    """A name of a problem factory that is the same in every run (no memory addresses)."""
    if isinstance(factory, functools.partial):
        args = [repr(a) for a in factory.args] + [f"{k}={v!r}" for k, v in sorted(factory.keywords.items())]
        return f"{_factory_name(factory.func)}({', '.join(args)})"
    qualname = getattr(factory, "__qualname__", None)
    if qualname is None or "<" in qualname:
        raise ScarceError(f"pass name=... for the problem factory {factory!r}: its checkpoints need a "
                          f"name that is the same in every run")
    return f"{getattr(factory, '__module__', '?')}.{qualname}"


#: Points of the probe batch whose outputs fingerprint a problem, and the seed they are drawn from.
PROBE_POINTS = 64
_PROBE_SEED = 20_240_601


def _probe(problem: RareEventProblem, dtype: str) -> str:
    """sha256 of the problem's outputs on a fixed batch of latent points.

    Two problems that share a name and a dimension but answer differently (another threshold,
    another model) get different fingerprints, so their checkpoints never mix. Scores are
    written with 10 significant digits: a float64 score that differs only in its last bits
    keeps its fingerprint, while a float32 model moved to another device usually changes it
    (its chunk counts would not be bit-identical either, so its checkpoints are not reused).
    """
    from scarce.normals import standard_normal

    u = standard_normal(np.random.default_rng(_PROBE_SEED), (PROBE_POINTS, problem.dim), dtype)
    digests = []
    for _ in range(2):  # twice: a problem whose answers change between calls has no output identity
        score, failed = problem.evaluate_latent(u, where="on the probe batch of the checkpoint fingerprint")
        digest = hashlib.sha256()
        digest.update(np.asarray(failed, dtype=np.uint8).tobytes())
        digest.update(" ".join(f"{value:.10g}" for value in np.asarray(score, dtype=np.float64)).encode())
        digests.append(digest.hexdigest())
    if digests[0] != digests[1]:
        raise ScarceError(
            f"{problem.name}: evaluate answered differently on two calls with the same probe batch (a random "
            "oracle, or non-deterministic GPU arithmetic), so its checkpoints cannot be keyed by its outputs; "
            "pass identity='...' to ChunkedMonteCarlo.estimate, a string that changes whenever the problem does")
    return digests[0]


def _chunk(task: tuple[Any, ...], shared: Any) -> dict[str, Any]:
    """One chunk: ``n`` samples from the chunk's own seed; returns its counts.

    The task ``("probe", dtype)`` returns the problem's fingerprint instead (run through the
    same executor as the chunks, so a factory's problem is built where the chunks run).
    """
    from scarce.estimators import MonteCarlo

    if task[0] == "probe":
        return {"fingerprint": _probe(_problem(shared), task[1])}
    index, n, entropy, batch, dtype = task
    seed = np.random.SeedSequence(entropy[0] if len(entropy) == 1 else entropy, spawn_key=(index,))
    start = time.perf_counter()
    result = MonteCarlo(n_samples=n, batch_size=batch, dtype=dtype).estimate(_problem(shared), seed=seed)
    return {"chunk": index, "n_samples": n, "n_failed": int(result.n_failed),
            "wall": time.perf_counter() - start}


def _entropy(seed: Any) -> list[int]:
    if isinstance(seed, bool) or seed is None or isinstance(seed, np.random.Generator):
        raise ScarceError(
            f"seed must be a non-negative int or a SeedSequence without spawn key for a resumable "
            f"Monte Carlo run, got {seed!r}: the chunks' seeds are recorded and must be reproducible")
    if isinstance(seed, np.random.SeedSequence):
        if seed.spawn_key:
            raise ScarceError(f"seed must be a root SeedSequence (empty spawn_key), got spawn_key {seed.spawn_key}")
        entropy = seed.entropy
    elif isinstance(seed, (int, np.integer)):
        entropy = int(seed)
    else:
        raise ScarceError(f"seed must be an int or a SeedSequence, got {type(seed).__name__}")
    if isinstance(entropy, (int, np.integer)):
        if entropy < 0:
            raise ScarceError(f"seed must be non-negative, got {entropy}")
        return [int(entropy)]
    return [int(x) for x in entropy]


class ChunkedMonteCarlo(Estimator):
    r"""Crude Monte Carlo over many chunks, resumable, on any executor.

    Parameters
    ----------
    n_samples : int
        Total samples ``N`` (10^8 and more is the intended use).
    chunk_size : int
        Samples per chunk: one task and one checkpoint (the last chunk may be smaller).
    batch_size : int
        Points per model call inside a chunk (a memory bound, not a statistical choice).
    dtype : {"float64", "float32"}
        Precision of the latent draws (see :class:`~scarce.estimators.MonteCarlo`).

    Notes
    -----
    Chunk ``c`` uses ``SeedSequence(seed).spawn(c + 1)[c]``, so its samples depend only on
    ``seed`` and ``c``. The checkpoint configuration holds the problem's name, dimension and
    probe fingerprint, the seed, ``chunk_size``, ``batch_size`` and ``dtype`` (not ``n_samples``):
    a directory refuses another problem or seed, and a larger budget later reuses the stored
    chunks. The fingerprint evaluates the problem on :data:`PROBE_POINTS` fixed latent points
    (one extra model call per run) rather than trusting its name: names are often defaults
    (``"problem"``) and two problems of one name can differ in a threshold or a model weight,
    and evaluating is the only identity check that sees every such difference. A stored chunk
    counts only when it records the sample count this run needs for it.

    Examples
    --------
    >>> from scarce.problems import linear
    >>> mc = ChunkedMonteCarlo(n_samples=200_000, chunk_size=50_000)
    >>> r = mc.estimate(linear(dim=5, probability=1e-2), seed=3)
    >>> lo, hi = r.ci(0.999)
    >>> r.n_samples, r.info["chunks"], lo < 1e-2 < hi
    (200000, 4, True)
    """

    method = "monte_carlo"

    def __init__(self, n_samples: int, chunk_size: int = 1_000_000, batch_size: int = 100_000,
                 dtype: str = "float64") -> None:
        self.n_samples = n_samples
        self.chunk_size = chunk_size
        self.batch_size = batch_size
        self.dtype = dtype

    def chunks(self) -> list[int]:
        """Sizes of the chunks, in order."""
        n = check_positive_int("n_samples", self.n_samples)
        size = check_positive_int("chunk_size", self.chunk_size)
        return [min(size, n - first) for first in range(0, n, size)]

    def estimate(
        self,
        problem: RareEventProblem | Callable[[], RareEventProblem],
        seed: int | np.random.SeedSequence,
        *,
        checkpoint_dir: str | os.PathLike[str] | None = None,
        executor: Executor | None = None,
        name: str | None = None,
        identity: str | None = None,
        progress: Callable[[int, int, str], None] | None = None,
    ) -> EstimateResult:
        """Run the chunks not checkpointed yet and reduce all of them.

        Parameters
        ----------
        problem : RareEventProblem or callable
            The problem, or a picklable zero-argument factory that builds it (called once per
            worker: a model loaded on the worker's own GPU, a closure a process pool cannot
            pickle).
        seed : int or SeedSequence
            Root of the chunks' seeds (recorded, so a rerun must pass the same).
        checkpoint_dir : path, optional
            Run directory of the chunk checkpoints; without one nothing is stored.
        executor : Executor, optional
            Where the chunks run (default: serially here).
        name : str, optional
            The problem's name in the checkpoint configuration (default: ``problem.name``, or
            the factory's qualified name and the arguments of a ``functools.partial``).
        identity : str, optional
            Keys the checkpoints instead of the probe fingerprint: a string that changes whenever
            the problem does (a model hash, a version). Needed when ``evaluate`` is not
            deterministic (a random oracle), which the probe detects and refuses.
        progress : callable, optional
            ``progress(done, total, key)`` after every chunk.
        """
        sizes = self.chunks()
        batch = check_positive_int("batch_size", self.batch_size)
        dtype = check_dtype(self.dtype).name
        entropy = _entropy(seed)
        label, dim = _identity(problem, name)
        start = time.perf_counter()
        store: Any = _MemoryStore()
        probe_queries = 0  # the probe's model calls (twice PROBE_POINTS): counted, not samples
        if checkpoint_dir is not None:
            if identity is None:
                probe_queries = 2 * PROBE_POINTS
            config = {"kind": "chunked_monte_carlo", "format": 2, "problem": label, "dim": dim,
                      "fingerprint": _fingerprint(problem, executor, dtype) if identity is None
                      else f"identity:{_check_identity(identity)}", "seed": entropy,
                      "chunk_size": int(self.chunk_size), "batch_size": batch, "dtype": dtype}
            store = ResultStore(checkpoint_dir, config)
        tasks = {f"chunk-{i:09d}": (i, n, entropy, batch, dtype) for i, n in enumerate(sizes)}
        payloads = run_grid(_ChunkStore(store, tasks), executor, _chunk, tasks, shared=problem, progress=progress,
                            seeds={key: {"entropy": entropy, "spawn_key": [task[0]]} for key, task in tasks.items()})
        _check_complete(store, tasks, payloads)
        return _reduce(payloads, label, time.perf_counter() - start, entropy=entropy, batch_size=batch,
                       chunks=len(sizes), chunk_size=int(self.chunk_size), dtype=dtype, probe_queries=probe_queries,
                       checkpoint_dir=None if checkpoint_dir is None else str(checkpoint_dir))


def _reduce(payloads: Mapping[str, Mapping[str, Any]], label: str, wall: float, *, entropy: list[int],
            **info: Any) -> EstimateResult:
    """The Monte Carlo result of all chunks: failures and samples summed.

    ``n_queries`` adds the probe's model calls to the samples: every point the model evaluated is
    counted, though only the samples enter the estimate (``n_samples``).
    """
    n = sum(int(p["n_samples"]) for p in payloads.values())
    failures = sum(int(p["n_failed"]) for p in payloads.values())
    p_hat = failures / n
    cov = math.sqrt((1 - p_hat) / (n * p_hat)) if failures else math.inf
    level = LevelDiagnostics(
        level=0, threshold=math.inf, probability=p_hat, cumulative_probability=p_hat, n_seeds=failures,
        correlation_factor=0.0, cov=cov, n_queries=n, n_failed=failures,
    )
    outcome = {"probability": p_hat, "cov": cov, "n_queries": n + info["probe_queries"], "n_failed": failures,
               "reached_failure": True, "status": "converged", "levels": (level,), "wall_time": wall}
    return build_result(
        ChunkedMonteCarlo, label, None, outcome, n_samples=n, level_probability=None, interval="clopper-pearson",
        info={"seed": {"entropy": entropy}, "batch_size": info["batch_size"], "chunks": info["chunks"],
              "chunk_size": info["chunk_size"], "dtype": info["dtype"],
              "chunk_seconds": float(sum(float(p["wall"]) for p in payloads.values())),
              "checkpoint_dir": info["checkpoint_dir"], "probe_queries": info["probe_queries"]},
    )


def _identity(problem: Any, name: str | None) -> tuple[str, int | None]:
    """The problem's label and dimension for the checkpoint configuration (checked)."""
    if name is not None and not (isinstance(name, str) and name.strip()):
        raise ScarceError(f"name must be a non-empty string or None, got {name!r}")
    if isinstance(problem, RareEventProblem):
        return name or problem.name, problem.dim
    if callable(problem):
        return name or _factory_name(problem), None
    raise ScarceError(f"problem must be a RareEventProblem or a factory returning one, got "
                      f"{type(problem).__name__}")


def _check_identity(identity: object) -> str:
    if not (isinstance(identity, str) and identity.strip()):
        raise ScarceError(f"identity must be a non-empty string or None, got {identity!r}")
    return identity


def _fingerprint(problem: Any, executor: Executor | None, dtype: str) -> str:
    """The probe fingerprint of the problem, computed where the chunks run."""
    runner = executor if executor is not None else SerialExecutor()
    return str(runner.map(_chunk, [("probe", dtype)], shared=problem)[0]["fingerprint"])


def _check_complete(store: Any, tasks: Mapping[str, Any], payloads: Mapping[str, Any]) -> None:
    """Raise naming the first chunk that failed, if any did (the finished ones stay stored)."""
    missing = [key for key in tasks if key not in payloads]
    if missing:
        first = store.errors().get(missing[0], {})
        raise ScarceError(
            f"{len(missing)} of {len(tasks)} Monte Carlo chunks failed (first: {missing[0]}: "
            f"{first.get('type', '?')}: {first.get('message', '?')}); the finished chunks are kept, "
            f"rerun to compute the rest")


class _ChunkStore:
    """A store seen through the chunks of this run: a stored chunk counts only if it matches.

    A checkpoint of chunk ``c`` is reused only when it records chunk ``c`` with exactly the
    sample count this run needs for it and a failure count in ``0..n``; anything else (the
    partial last chunk of a smaller budget, a damaged record) is recomputed and overwritten.
    """

    def __init__(self, store: Any, tasks: Mapping[str, tuple[Any, ...]]) -> None:
        self._store, self._tasks = store, tasks

    def load(self, key: str) -> dict[str, Any] | None:
        payload = self._store.load(key)
        if payload is None:
            return None
        index, n = self._tasks[key][0], self._tasks[key][1]
        try:
            ok = (int(payload["chunk"]) == index and int(payload["n_samples"]) == n
                  and 0 <= int(payload["n_failed"]) <= n and math.isfinite(float(payload["wall"])))
        except (KeyError, TypeError, ValueError):
            ok = False
        return payload if ok else None

    def save(self, key: str, payload: Mapping[str, Any], *, seed: Any = None) -> None:
        self._store.save(key, payload, seed=seed)

    def save_error(self, key: str, error: BaseException) -> None:
        self._store.save_error(key, error)

    def errors(self) -> dict[str, dict[str, Any]]:
        return self._store.errors()


class _MemoryStore:
    """The part of ResultStore's interface :func:`run_grid` uses, in memory (no checkpoints)."""

    def __init__(self) -> None:
        self._payloads: dict[str, dict[str, Any]] = {}
        self._errors: dict[str, dict[str, Any]] = {}

    def load(self, key: str) -> dict[str, Any] | None:
        return self._payloads.get(key)

    def save(self, key: str, payload: Mapping[str, Any], *, seed: Any = None) -> None:
        self._payloads[key] = dict(payload)
        self._errors.pop(key, None)

    def save_error(self, key: str, error: BaseException) -> None:
        self._errors[key] = {"key": key, "type": type(error).__name__, "message": str(error)}

    def errors(self) -> dict[str, dict[str, Any]]:
        return dict(self._errors)
