"""Lesson 00 Start here: the check of the warm-up exercise."""

from __future__ import annotations

from typing import Callable, Sequence

import torch

from helpers.checks import Mistake, call, expect_tensor, passed
from helpers.reference import start as ref


def check_to_fahrenheit(fn: Callable[[torch.Tensor], torch.Tensor], inputs: Sequence[torch.Tensor] | None = None) -> None:
    inputs = inputs if inputs is not None else [torch.tensor([0.0, 100.0]), torch.tensor([[-40.0, 37.0], [20.0, -17.8125]])]
    for celsius in inputs:
        got = call(fn, celsius)
        expect_tensor(got, ref.to_fahrenheit(celsius), what=f"to_fahrenheit({celsius.tolist()})",
                      mistakes=[Mistake("the ratio is upside down: multiply by 9/5, not 5/9", lambda: celsius * 5 / 9 + 32,
                                        where="look at the factor you multiply by"),
                                Mistake("add 32 after multiplying, not before", lambda: (celsius + 32) * 9 / 5,
                                        where="look at the order of the operations (what the brackets group)"),
                                Mistake("your result is celsius + 32, as if the factor were 1: 9 // 5 is floor division, "
                                        "which rounds down to the whole number 1; 9 / 5 is 1.8",
                                        lambda: celsius * (9 // 5) + 32,
                                        where="look at the factor you multiply by"),
                                Mistake("// is floor division: it rounded your values down to whole numbers; "
                                        "/ divides exactly",
                                        lambda: (celsius * 9) // 5 + 32,
                                        where="look at the division operator"),
                                Mistake("you forgot to add 32", lambda: celsius * 9 / 5,
                                        where="look at every term of F = C × 9/5 + 32: is each one in your code?")])
    passed("to_fahrenheit", len(inputs))
