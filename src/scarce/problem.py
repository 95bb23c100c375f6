"""The rare-event problem: what to estimate, apart from how.

A problem is a standard-normal latent space ``u ~ N(0, I_dim)``, an optional
transform ``x = T(u)`` to the model's input space, and a vectorised
``evaluate(x) -> (score, failed)`` that costs one model call per point.
Larger scores are closer to failure.  For a classic limit-state problem
``failed = score >= threshold``; in SCARCE the score comes from a ruler and the
failure flag from the true oracle (DESIGN.md section 2, decision 1).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from scarce.errors import EvaluationError, ScarceError, check_positive_int, describe_bad_positions

Evaluate = Callable[[Any], tuple[Any, Any]]
Transform = Callable[[np.ndarray], Any]


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
        self.dim = check_positive_int("dim", dim)
        if not callable(evaluate):
            raise ScarceError(f"evaluate must be callable x -> (score, failed), got {evaluate!r}")
        if transform is not None and not callable(transform):
            raise ScarceError(f"transform must be callable u -> x or None, got {transform!r}")
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

        ``score`` is vectorised, ``(n, ...) -> (n,)``.
        """
        threshold = float(threshold)

        def evaluate(x: Any) -> tuple[np.ndarray, np.ndarray]:
            s = np.asarray(score(x), dtype=float)
            return s, s >= threshold

        return cls(dim, evaluate, transform, **kwargs)

    def evaluate_latent(self, u: np.ndarray, *, where: str = "") -> tuple[np.ndarray, np.ndarray]:
        """Map ``u (n, d)`` to inputs, evaluate once, and validate the output.

        Returns ``score`` (float64, shape ``(n,)``) and ``failed`` (bool, ``(n,)``).
        Raises :class:`EvaluationError` naming ``where`` (level and step) when the
        model raises or returns non-finite scores or wrong shapes.
        """
        n = u.shape[0]
        at = f" {where}" if where else ""
        try:
            x = u if self.transform is None else self.transform(u)
            out = self.evaluate(x)
        except Exception as exc:  # noqa: BLE001 - re-raised with context
            raise EvaluationError(f"{self.name}: evaluate raised {type(exc).__name__}{at}: {exc}") from exc
        if not (isinstance(out, tuple) and len(out) == 2):
            raise EvaluationError(
                f"{self.name}: evaluate must return a tuple (score, failed){at}, got {type(out).__name__}"
            )
        return _validate_output(out[0], out[1], n, f"{self.name}{at}")


def _validate_output(score: Any, failed: Any, n: int, context: str) -> tuple[np.ndarray, np.ndarray]:
    score = _as_numpy(score)
    failed = _as_numpy(failed)
    if score.shape != (n,):
        raise EvaluationError(f"{context}: score must have shape ({n},) for {n} points, got {score.shape}")
    if failed.shape != (n,):
        raise EvaluationError(f"{context}: failed must have shape ({n},) for {n} points, got {failed.shape}")
    if score.dtype.kind not in "biuf":
        raise EvaluationError(f"{context}: score must be real numbers, got dtype {score.dtype}")
    if failed.dtype.kind == "b":
        failed_bool = failed
    elif failed.dtype.kind in "iu" and np.isin(failed, (0, 1)).all():
        failed_bool = failed.astype(bool)
    else:
        raise EvaluationError(f"{context}: failed must be boolean (or 0/1 integers), got dtype {failed.dtype}")
    score = score.astype(np.float64, copy=False)
    bad = ~np.isfinite(score)
    if bad.any():
        raise EvaluationError(f"{context}: non-finite score at {describe_bad_positions(bad)} of the batch of {n}")
    return score, failed_bool


def _as_numpy(value: Any) -> np.ndarray:
    """Convert arrays from numpy, torch (detached, to CPU) or lists to numpy."""
    if hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    return np.asarray(value)
