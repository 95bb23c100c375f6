"""Registry of estimators by name, so a configuration file or a command line can pick one.

Each entry maps a name to a class, given lazily as ``"module:Class"`` (listing the names
imports nothing) or as the class itself:

| name | estimator |
|---|---|
| ``"subset_simulation"`` | :class:`~scarce.estimators.SubsetSimulation` (the library's own) |
| ``"monte_carlo"`` | :class:`~scarce.estimators.MonteCarlo` (crude Monte Carlo) |
| ``"amls"`` | :class:`~scarce.estimators.AMLS` (the published AMLS baseline) |
| ``"splitting"`` | :class:`~scarce.estimators.AdaptiveMultilevelSplitting` (unbiased) |

:class:`~scarce.experiments.montecarlo.ChunkedMonteCarlo` (crude Monte Carlo over
checkpointed chunks, for ground truths of 10^8 samples and more) is not registered: estimators
sit below experiments in the package's layers and must not import them.  Build it directly,
``ChunkedMonteCarlo(n_samples=10**8, chunk_size=10**6)``, and pass ``checkpoint_dir=`` to its
``estimate`` to make the run resumable; or register it in your own code with
``register_estimator("chunked_monte_carlo", "scarce.experiments.montecarlo:ChunkedMonteCarlo")``.

Every registered class follows the estimator contract of :mod:`scarce.testing.estimators`:
its constructor only stores its parameters (they are validated by ``estimate``), and
``estimate(problem, seed=...)`` returns a :class:`~scarce.results.EstimateResult`.

Examples
--------
>>> available_estimators()
['amls', 'monte_carlo', 'splitting', 'subset_simulation']
>>> make_estimator("subset_simulation", n_samples=500).n_samples
500
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

from scarce.errors import ScarceError, show, unknown_name_error

__all__ = ["ESTIMATORS", "available_estimators", "make_estimator", "register_estimator"]

#: Registered estimators: name -> ``"module:Class"`` (imported on first use) or the class.
ESTIMATORS: dict[str, str | type] = {
    "subset_simulation": "scarce.estimators.subset:SubsetSimulation",
    "monte_carlo": "scarce.estimators.montecarlo:MonteCarlo",
    "amls": "scarce.estimators.amls:AMLS",
    "splitting": "scarce.estimators.splitting:AdaptiveMultilevelSplitting",
}


def available_estimators() -> list[str]:
    """Registered estimator names, sorted.

    Returns
    -------
    list of str

    Examples
    --------
    >>> "monte_carlo" in available_estimators()
    True
    """
    return sorted(ESTIMATORS)


def _resolve(name: str) -> type:
    """The class registered as ``name`` (importing its module if it is given as a string)."""
    target = ESTIMATORS[name]
    if not isinstance(target, str):
        return target
    module, _, attr = target.partition(":")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise ScarceError(f"estimator {name!r} is registered as {target!r}, which cannot be imported "
                          f"({type(exc).__name__}: {exc})") from exc


def _parameters(cls: type) -> tuple[list[str], bool]:
    """Names ``cls(...)`` takes by keyword, and whether it also takes any keyword (``**kwargs``)."""
    params = list(inspect.signature(cls.__init__).parameters.values())[1:]  # without self
    named = [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    return named, any(p.kind is p.VAR_KEYWORD for p in params)


def make_estimator(name: str, **params: Any) -> Any:
    """Build an estimator by registry name.

    Parameters
    ----------
    name : str
        A name from :func:`available_estimators`.
    **params
        Constructor parameters (e.g. ``n_samples=500``).  Only their names are checked here;
        their values are validated by ``estimate``, before any model call.

    Returns
    -------
    object
        The estimator; call ``estimate(problem, seed=...)``.

    Raises
    ------
    ScarceError
        (a ``ValueError``) for an unknown name, with the closest names and the list of
        registered ones, or for a parameter the estimator does not take, with the
        parameters it does take.

    Examples
    --------
    >>> type(make_estimator("amls", n_samples=200, n_steps=10)).__name__
    'AMLS'
    >>> make_estimator("amsl")
    Traceback (most recent call last):
    ...
    scarce.errors.ScarceError: unknown estimator 'amsl'. Did you mean 'amls'? Available: amls, monte_carlo, splitting, subset_simulation
    >>> make_estimator("monte_carlo", n_sample=10)
    Traceback (most recent call last):
    ...
    scarce.errors.ScarceError: estimator 'monte_carlo' (MonteCarlo) takes no parameter(s) ['n_sample']; allowed parameters: n_samples, batch_size, dtype, allow_large
    """
    if not isinstance(name, str) or name not in ESTIMATORS:
        raise unknown_name_error("estimator", name, ESTIMATORS)
    cls = _resolve(name)
    allowed, any_keyword = _parameters(cls)
    unknown = sorted(set(params) - set(allowed))
    if unknown and not any_keyword:
        raise ScarceError(f"estimator {name!r} ({cls.__name__}) takes no parameter(s) {unknown}; "
                          f"allowed parameters: {', '.join(allowed) or '(none)'}")
    return cls(**params)


def register_estimator(name: str, target: str | type, overwrite: bool = False) -> None:
    """Add an estimator to the registry.

    Parameters
    ----------
    name : str
        New registry key.
    target : str or type
        The estimator class, or ``"module:Class"`` (imported by the first
        :func:`make_estimator` that asks for it).  Check your class with
        :func:`scarce.testing.estimators.check_estimator` before you trust its estimates.
    overwrite : bool
        Replace an existing entry instead of raising.

    Raises
    ------
    ScarceError
        An empty or non-string name, a target that is neither a class nor ``"module:Class"``,
        or a name already registered (unless ``overwrite=True``).

    Examples
    --------
    >>> register_estimator("crude", "scarce.estimators.montecarlo:MonteCarlo")
    >>> make_estimator("crude", n_samples=1000).n_samples
    1000
    >>> register_estimator("crude", "scarce.estimators.amls:AMLS")
    Traceback (most recent call last):
    ...
    scarce.errors.ScarceError: estimator 'crude' is already registered as 'scarce.estimators.montecarlo:MonteCarlo'; pass overwrite=True to replace it
    >>> del ESTIMATORS["crude"]
    """
    if not isinstance(name, str) or not name:
        raise ScarceError(f"name must be a non-empty string, got {show(name)}")
    if isinstance(target, str):
        module, sep, attr = target.partition(":")
        if not (sep and module and attr):
            raise ScarceError(f"target must be a class or a 'module:Class' string, got {target!r}")
    elif not isinstance(target, type):
        raise ScarceError(f"target must be a class or a 'module:Class' string, got {show(target)}")
    if name in ESTIMATORS and not overwrite:
        raise ScarceError(f"estimator {name!r} is already registered as {show(ESTIMATORS[name])}; "
                          "pass overwrite=True to replace it")
    ESTIMATORS[name] = target
