"""Every check accepts its reference and other correct answers, and rejects each plausible wrong answer by name."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import tests.wrong_answers as wrong_answers
from helpers.checks import CheckError
from tests.wrong_answers import Accept, Reject, is_reference

MODULES = [importlib.import_module(f"tests.wrong_answers.{m.name}") for m in pkgutil.iter_modules(wrong_answers.__path__)]
CASES = [(module.__name__.rsplit(".", 1)[1], case) for module in MODULES for case in module.CASES]


@pytest.mark.parametrize("lesson,case", CASES, ids=[f"{lesson}:{case.label}" for lesson, case in CASES])
def test_check(lesson, case, capsys):
    if isinstance(case, Accept):
        case.check(case.answer)
        assert "✔" in capsys.readouterr().out, "a passing check must print its pass line"
    else:
        with pytest.raises(CheckError) as error:
            case.check(case.answer)
        assert case.expect in str(error.value), f"wrong message: {error.value}"


@pytest.mark.parametrize("module", MODULES, ids=[m.__name__.rsplit(".", 1)[1] for m in MODULES])
def test_every_check_has_two_wrong_answers(module):
    """Each check function of the lesson is exercised: reference accepted, >= 2 wrong answers rejected."""
    checks = {case.check for case in module.CASES}
    check_module = importlib.import_module(f"helpers.checks.{module.__name__.rsplit('.', 1)[1]}")
    defined = {getattr(check_module, name) for name in dir(check_module) if name.startswith("check_")}
    assert defined <= checks, f"checks without wrong-answer tests: {sorted(f.__name__ for f in defined - checks)}"
    for check in checks:
        kinds = [type(case) for case in module.CASES if case.check is check]
        assert Accept in kinds, f"{check.__name__}: the reference is never accepted"
        assert kinds.count(Reject) >= 2, f"{check.__name__}: fewer than two wrong answers"


ALTERNATIVES = 3  # correct answers written differently from the reference, per check


@pytest.mark.parametrize("module", MODULES, ids=[m.__name__.rsplit(".", 1)[1] for m in MODULES])
def test_every_check_accepts_three_alternatives(module):
    """Each check passes at least three correct answers that are not the reference (a loop and a vectorised version,
    another API, keyword arguments...): a check that fails a correct answer written another way is a bug."""
    short = {}
    for check in {case.check for case in module.CASES}:
        accepts = [case for case in module.CASES if case.check is check and isinstance(case, Accept)]
        alternatives = [case for case in accepts if not is_reference(case.answer)]
        if len(alternatives) < ALTERNATIVES:
            short[check.__name__] = len(alternatives)
    short = dict(sorted(short.items()))
    assert not short, f"checks with fewer than {ALTERNATIVES} Accept alternatives (not helpers.reference): {short}"
