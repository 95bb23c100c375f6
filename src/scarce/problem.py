"""The rare-event problem: what to estimate, apart from how.

A problem is a standard-normal latent space ``u ~ N(0, I_dim)``, an optional
transform ``x = T(u)`` to the model's input space, and a vectorised
``evaluate(x) -> (score, failed)`` that costs one model call per point.
Larger scores are closer to failure.  For a classic limit-state problem
``failed = score >= threshold``; in SCARCE the score comes from a ruler and the
failure flag from the true oracle (the exact terminal event).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from scarce.checks import tensor_to_numpy
from scarce.checks import check_finite_float, check_in_interval, check_positive_int, describe_bad_positions
from scarce.errors import EvaluationError, ScarceError, show

Evaluate = Callable[[Any], tuple[Any, Any]]
Transform = Callable[[np.ndarray], Any]

#: Largest latent dimension: one float64 point of this size takes 800 MB, and a level holds
#: ``n_samples`` of them, so anything larger cannot run and is reported before any work.
MAX_DIM = 10**8


class RareEventProblem:
    r"""A rare failure event of a model under a random input.

    The estimand is :math:`P_f = P_{u \sim N(0, I_d)}(\text{failed}(T(u)))`.

    Parameters
    ----------
    dim : int
        Dimension ``d`` of the standard-normal latent variable ``u``.
    evaluate : callable
        ``evaluate(x) -> (score, failed)`` for a batch ``x = transform(u)`` of
        ``n`` points: ``score`` of shape ``(n,)``, real and finite, larger means
        closer to failure; ``failed`` of shape ``(n,)``, boolean (or 0/1), the
        true failure event.  One call evaluates the whole batch; every point
        counts as one query.
    transform : callable, optional
        ``u (n, d) -> x`` mapping the latent sample to model inputs (for
        example ``clip(x0 + sigma * u)``).  Identity when omitted.
    name : str, optional
        Shown in tables and result files.
    exact_probability : float, optional
        The true ``P_f`` when it is known (benchmark problems).

    Examples
    --------
    >>> import numpy as np
    >>> problem = RareEventProblem.from_score(lambda u: u.sum(1) / np.sqrt(4), dim=4, threshold=3.0)
    >>> score, failed = problem.evaluate_latent(np.zeros((2, 4)))
    >>> score.tolist(), failed.tolist()
    ([0.0, 0.0], [False, False])
    """

    def __init__(
        self,
        dim: int,
        evaluate: Evaluate,
        transform: Transform | None = None,
        *,
        name: str = "problem",
        exact_probability: float | None = None,
    ) -> None:
        self.dim = check_positive_int("dim", dim, maximum=MAX_DIM)
        if not callable(evaluate):
            raise ScarceError(f"evaluate must be callable x -> (score, failed), got {show(evaluate)}")
        if transform is not None and not callable(transform):
            raise ScarceError(f"transform must be callable u -> x or None, got {show(transform)}")
        if not isinstance(name, str) or not name:
            raise ScarceError(f"name must be a non-empty string, got {show(name)} ({type(name).__name__})")
        if exact_probability is not None:
            exact_probability = check_in_interval("exact_probability", exact_probability, 0.0, 1.0, low_open=False)
        self.evaluate = evaluate
        self.transform = transform
        self.name = name
        self.exact_probability = exact_probability

    @classmethod
    def from_score(
        cls,
        score: Callable[[Any], Any],
        dim: int,
        threshold: float = 0.0,
        transform: Transform | None = None,
        **kwargs: Any,
    ) -> RareEventProblem:
        """A classic problem: ``failed = score(x) >= threshold``.

        ``score`` is vectorised, ``(n, ...) -> (n,)``; it may return numpy arrays, lists or
        torch tensors of any real dtype (see :meth:`evaluate_latent`).
        """
        threshold = check_finite_float("threshold", threshold)
        if not callable(score):
            raise ScarceError(f"score must be callable x -> (n,) scores, got {show(score)}")
        unknown = sorted(set(kwargs) - {"name", "exact_probability"})
        if unknown:
            raise ScarceError(f"from_score takes no parameter(s) {unknown}; allowed: score, dim, threshold, "
                              "transform, name, exact_probability")

        def evaluate(x: Any) -> tuple[np.ndarray, np.ndarray]:
            s = _as_numpy(score(x), "score", "from_score")
            if s.dtype.kind not in "biuf":
                raise EvaluationError(f"from_score: score must return real numbers, got dtype {s.dtype}")
            s = s.astype(np.float64, copy=False)
            return s, s >= threshold

        return cls(dim, evaluate, transform, **kwargs)

    def evaluate_latent(self, u: np.ndarray, *, where: str = "") -> tuple[np.ndarray, np.ndarray]:
        """Map ``u (n, d)`` to inputs, evaluate once, and validate the output.

        Returns ``score`` (float64, shape ``(n,)``) and ``failed`` (bool, ``(n,)``).
        The model may return numpy arrays, lists or torch tensors (any device; dtypes numpy
        cannot hold, such as bfloat16, are widened to float32 first); ``failed`` may be bool
        or exactly 0/1 numbers.

        Raises
        ------
        ScarceError
            ``u`` is not a real array of shape ``(n, dim)``.
        EvaluationError
            Naming ``where`` (level and step) when the model raises, or returns something
            that is not a pair of arrays of shape ``(n,)`` (ragged lists, wrong shapes or
            dtypes, non-finite scores, ``failed`` values other than 0/1).
        """
        if not isinstance(u, np.ndarray) or u.ndim != 2 or u.shape[1] != self.dim or u.dtype.kind != "f":
            got = f"shape {u.shape}, dtype {u.dtype}" if isinstance(u, np.ndarray) else type(u).__name__
            raise ScarceError(f"u must be a float array of shape (n, {self.dim}), got {got}")
        n = u.shape[0]
        at = f" {where}" if where else ""
        mine = u.copy()  # the user's code may write into its input: never into the engine's states
        try:
            x = mine if self.transform is None else self.transform(mine)
            out = self.evaluate(x)
        except Exception as exc:  # noqa: BLE001 - re-raised with context
            raise EvaluationError(f"{self.name}: evaluate raised {type(exc).__name__}{at}: {exc}") from exc
        if not (isinstance(out, tuple) and len(out) == 2):
            raise EvaluationError(
                f"{self.name}: evaluate must return a tuple (score, failed){at}, got {type(out).__name__}"
            )
        return _validate_output(out[0], out[1], n, f"{self.name}{at}")


def _validate_output(score: Any, failed: Any, n: int, context: str) -> tuple[np.ndarray, np.ndarray]:
    score = _as_numpy(score, "score", context)
    failed = _as_numpy(failed, "failed", context)
    if score.shape != (n,):
        raise EvaluationError(f"{context}: score must have shape ({n},) for {n} points, got {score.shape}")
    if failed.shape != (n,):
        raise EvaluationError(f"{context}: failed must have shape ({n},) for {n} points, got {failed.shape}")
    if score.dtype.kind not in "biuf":
        raise EvaluationError(f"{context}: score must be real numbers, got dtype {score.dtype}")
    if failed.dtype.kind == "b":
        failed_bool = failed
    elif failed.dtype.kind in "iuf" and np.isin(failed, (0, 1)).all():
        failed_bool = failed.astype(bool)
    else:
        bad = ~np.isin(failed, (0, 1)) if failed.dtype.kind in "iuf" else np.ones(n, bool)
        raise EvaluationError(
            f"{context}: failed must be boolean (or exactly 0/1 numbers), got dtype {failed.dtype}"
            + (f" with other values at {describe_bad_positions(bad)}" if failed.dtype.kind in "iuf" else "")
        )
    with np.errstate(over="ignore"):
        score = score.astype(np.float64, copy=False)
    bad = ~np.isfinite(score)
    if bad.any():
        raise EvaluationError(f"{context}: non-finite score at {describe_bad_positions(bad)} of the batch of {n}")
    return score, failed_bool


def _as_numpy(value: Any, what: str, context: str) -> np.ndarray:
    """Convert arrays from numpy, torch (detached, to CPU) or lists to numpy.

    Torch floating dtypes numpy cannot represent (bfloat16, the float8 types) are widened
    to float32 first. Anything that cannot become one rectangular array (a ragged list, a
    tensor on a device that cannot be copied) raises :class:`EvaluationError` naming ``what``.
    """
    if isinstance(value, np.ma.MaskedArray) and np.ma.is_masked(value):
        raise EvaluationError(f"{context}: {what} must be an array of numbers of shape (n,); got a masked array with "
                              f"{int(np.ma.count_masked(value))} masked entries (a model must score every point)")
    try:
        return np.asarray(tensor_to_numpy(value))
    except Exception as exc:  # noqa: BLE001 - any conversion failure is the model's output's fault
        shape = getattr(value, "shape", None)
        described = f"{type(value).__name__}" + (f" of shape {tuple(shape)}" if shape is not None else "")
        raise EvaluationError(
            f"{context}: {what} must be an array of numbers of shape (n,); could not convert "
            f"the {described} returned ({type(exc).__name__}: {exc})"
        ) from exc

