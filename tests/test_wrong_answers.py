"""Every check accepts its reference and other correct answers, and rejects each plausible wrong answer by name."""

from __future__ import annotations

import functools
import importlib
import inspect
import pkgutil
import sys
import types

import pytest

import tests.wrong_answers as wrong_answers
import helpers.checks as checks_framework
from helpers.checks import CheckError
from tests.wrong_answers import Accept, Reject, is_reference

MODULES = [importlib.import_module(f"tests.wrong_answers.{m.name}") for m in pkgutil.iter_modules(wrong_answers.__path__)]
CASES = [(module.__name__.rsplit(".", 1)[1], case) for module in MODULES for case in module.CASES]


@pytest.mark.parametrize("lesson,case", CASES, ids=[f"{lesson}:{case.label}" for lesson, case in CASES])
def test_check(lesson, case, capsys):
    if isinstance(case, Accept):
        answer, direct = _watched(case.answer, lesson)
        case.check(answer)
        assert "✔" in capsys.readouterr().out, "a passing check must print its pass line"
        assert not direct, (f"{case.check.__name__} called the learner's function without `call` (so without the "
                            f"framework's rules) from {sorted(direct)}")
    else:
        with pytest.raises(CheckError) as error:
            case.check(case.answer)
        assert case.expect in str(error.value), f"wrong message: {error.value}"


# Where a check may call the learner's function other than through `call`, and why. Everything else goes through
# `call`, so the framework's rules (arguments unchanged, state that outlives the call, types) hold for every check.
DIRECT_CALLERS = {
    # a second, diagnostic call on "meta" copies of inputs the rules were already checked on (call compares values,
    # which a meta tensor does not have)
    "_meta_device_problem": "tensors",
    # a second call, on copies of inputs the rules were already checked on, counting the values read into Python
    # (the framework's own bookkeeping around a call would be counted too)
    "_host_reads_problem": "tensors",
    # timing repeats of a call whose rules _expect_same_training already checked: the rules' own bookkeeping
    # (snapshots of the model) must not be timed
    "_cpu_seconds": "faster",
}
# lessons whose checks send the learner's function to other processes by name (a stand-in would not pickle)
_PROCESSES = {"distributed"}


def _watched(answer, lesson):
    """``answer`` in a copy that records each call made other than through the framework's ``call``.

    Only the reference's plain functions are watched (the Accept every check has): the copy keeps their
    globals, name and signature, so substitute() and the checks' signature reading see the same function.
    """
    direct: set[str] = set()
    if lesson in _PROCESSES or not (inspect.isfunction(answer) and is_reference(answer)):
        return answer, direct
    invoke, getframe, allowed = checks_framework._invoke.__code__, sys._getframe, DIRECT_CALLERS
    # the copy runs in the reference's globals: everything the guard uses is a closure variable

    def guard(*args, **kwargs):
        frame = getframe(1)
        caller = frame.f_code.co_name
        while frame is not None and frame.f_code is not invoke:
            frame = frame.f_back
        if frame is None and allowed.get(caller) != lesson:
            direct.add(caller)
        return answer(*args, **kwargs)

    copy = types.FunctionType(guard.__code__, answer.__globals__, answer.__name__, None, guard.__closure__)
    functools.update_wrapper(copy, answer)
    return copy, direct


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
