"""Plausible wrong answers for every exercise, one module per lesson.

Each module defines ``CASES``: a list of :class:`Accept` (a correct answer the
check must pass: the reference, and at least three *alternatives* written
differently, see :func:`is_reference`) and :class:`Reject` (a wrong answer the
check must fail with a message containing ``expect``; ``str(error)`` holds every
rung of the hint ladder, so ``expect`` may be the symptom, where to look, or the
named mistake). ``tests/test_wrong_answers.py`` runs them all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable


@dataclass(frozen=True)
class Accept:
    """``check(answer)`` must pass."""

    check: Callable[..., Any]
    answer: Any

    @property
    def label(self) -> str:
        return f"{getattr(self.check, '__name__', 'check')}-accepts-{getattr(self.answer, '__name__', 'answer')}"


@dataclass(frozen=True)
class Reject:
    """``check(answer)`` must raise CheckError whose message contains ``expect``."""

    check: Callable[..., Any]
    answer: Any
    expect: str

    @property
    def label(self) -> str:
        return f"{getattr(self.check, '__name__', 'check')}-rejects-{getattr(self.answer, '__name__', 'answer')}"


def is_reference(answer: Any) -> bool:
    """The answer is (or is defined in) the course's reference implementation, ``helpers.reference``."""
    module = getattr(answer, "__module__", None) or type(answer).__module__
    return module == "helpers.reference" or module.startswith("helpers.reference.")
