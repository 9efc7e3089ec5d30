"""How well the checks catch the course's plausible wrong answers: a table per lesson.

For every :class:`Reject` in ``tests/wrong_answers``: is it rejected at all
(the check raises CheckError), and does the message name the mistake (it
contains the case's expected text)? Crashes of the check itself count as
neither. ``where`` and ``mistake`` are the shares of rejections whose message
has that rung of the hint ladder above its symptom (where to look; the named
mistake, given only when the evidence shows it). For every :class:`Accept` whose answer is not the reference (an
*alternative*: a correct answer written another way): is it accepted? One that
is not is a correct answer losing points; ``losing`` counts every Accept that
fails, the reference's included. Run from the repository root::

    COURSE_DATA=$PWD/.cache/course-data .venv/bin/python -m tests.wrong_answer_rates [-v] [lesson ...]
"""

from __future__ import annotations

import contextlib
import importlib
import io
import pkgutil
import sys

import torch

import tests.wrong_answers as wrong_answers
from helpers.checks import CheckError
from tests.wrong_answers import Accept, Reject, is_reference


def outcome(case: Reject | Accept) -> str:
    """'named', 'rejected' (another message), 'accepted' or 'crashed' (the check's own exception)."""
    return judge(case)[0]


def judge(case: Reject | Accept) -> tuple[str, CheckError | None]:
    """The outcome, and the check's error when it rejected the answer."""
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            case.check(case.answer)
    except CheckError as error:
        return ("named" if isinstance(case, Reject) and case.expect in str(error) else "rejected"), error
    except Exception:  # noqa: BLE001 - a check crashing is what we count
        return "crashed", None
    finally:
        torch.set_grad_enabled(True)  # a wrong answer that switched it off must not spoil the next case
    return "accepted", None


def rungs(error: CheckError | None) -> tuple[bool, bool]:
    """Whether the message has the ladder's second rung (where to look) and its third (the named mistake)."""
    return (False, False) if error is None else (bool(error.where), bool(error.mistake))


def main(argv: list[str]) -> int:
    verbose = "-v" in argv
    argv = [a for a in argv if a != "-v"]
    names = [m.name for m in pkgutil.iter_modules(wrong_answers.__path__) if not m.name.startswith("_")]
    names = [n for n in names if not argv or any(a in n for a in argv)]
    print(f"{'lesson module':<16} {'wrong answers':>13} {'rejected':>9} {'named':>7} {'crashed':>8}"
          f" {'where':>6} {'mistake':>8} {'alternatives':>13} {'accepted':>9} {'losing':>7}")
    keys = ("n", "rejected", "named", "crashed", "where", "mistake", "alternatives", "accepted", "losing")
    total = dict.fromkeys(keys, 0)
    for name in names:
        try:
            module = importlib.import_module(f"tests.wrong_answers.{name}")
        except Exception as error:  # noqa: BLE001 - another lesson half-written must not stop the table
            print(f"{name:<16} cannot import: {type(error).__name__}: {error}")
            continue
        cases = [case for case in module.CASES if isinstance(case, Reject)]
        judged = [judge(case) for case in cases]
        results = [result for result, _ in judged]
        accepts = [case for case in module.CASES if isinstance(case, Accept)]
        passes = [outcome(case) == "accepted" for case in accepts]
        alternatives = [ok for case, ok in zip(accepts, passes) if not is_reference(case.answer)]
        if verbose:
            for case, (result, error) in zip(cases, judged):
                if result != "named":
                    print(f"  {result:<9} {case.label}")
                elif not rungs(error)[0]:
                    print(f"  no where  {case.label}")
            for case, ok in zip(accepts, passes):
                if not ok:
                    print(f"  losing    {case.label} (a correct answer fails)")
        row = {"n": len(results), "rejected": sum(r in ("named", "rejected") for r in results),
               "named": results.count("named"), "crashed": results.count("crashed"),
               "where": sum(rungs(error)[0] for _, error in judged),
               "mistake": sum(rungs(error)[1] for _, error in judged),
               "alternatives": len(alternatives), "accepted": sum(alternatives), "losing": passes.count(False)}
        for key in keys:
            total[key] += row[key]
        print(_row(name, row))
    print(_row("all", total))
    return 0


def _row(name: str, row: dict) -> str:
    n, rejected = max(row["n"], 1), max(row["rejected"], 1)
    accepted = f"{row['accepted'] / row['alternatives']:.0%}" if row["alternatives"] else "-"
    return (f"{name:<16} {row['n']:>13} {row['rejected'] / n:>9.0%} {row['named'] / n:>7.0%} {row['crashed']:>8}"
            f" {row['where'] / rejected:>6.0%} {row['mistake'] / rejected:>8.0%}"
            f" {row['alternatives']:>13} {accepted:>9} {row['losing']:>7}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
