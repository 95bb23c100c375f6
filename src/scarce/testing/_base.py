"""What every check suite shares: a named rule, the error that names it, and running a suite."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any


class ContractViolation(AssertionError):
    """A component broke a rule of its contract.

    Attributes
    ----------
    component : str
        ``repr`` of the component checked.
    rule : str
        The rule's name (as listed by the suite's ``*_checks`` function).
    """

    def __init__(self, component: Any, rule: str, how: str) -> None:
        self.component, self.rule = repr(component), rule
        super().__init__(f"{self.component} broke the rule {rule!r}: {how}")


class CheckSkipped(Exception):
    """A rule that does not apply to this component (e.g. a budget rule for an estimator without a budget)."""


@dataclass(frozen=True)
class Check:
    """One rule of a contract: ``check(component)`` raises :class:`ContractViolation` when broken."""

    rule: str
    doc: str
    func: Callable[[Any], None]

    def __call__(self, component: Any) -> None:
        try:
            self.func(component)
        except (ContractViolation, CheckSkipped):
            raise
        except AssertionError as exc:
            raise ContractViolation(component, self.rule, str(exc) or "an assertion failed") from exc
        except Exception as exc:  # a crash inside the component is a broken rule too
            raise ContractViolation(component, self.rule, f"raised {type(exc).__name__}: {exc}") from exc


def rule(doc: str) -> Callable[[Callable[[Any], None]], Check]:
    """Decorator: a function ``check_<name>(component)`` becomes the :class:`Check` named ``<name>``."""

    def wrap(func: Callable[[Any], None]) -> Check:
        return Check(func.__name__.removeprefix("check_"), doc, func)

    return wrap


def run_checks(component: Any, checks: Iterator[Check] | list[Check]) -> list[str]:
    """Run every check on ``component``; raise the first violation; return the rules skipped."""
    skipped = []
    for check in checks:
        try:
            check(component)
        except CheckSkipped:
            skipped.append(check.rule)
    return skipped
