"""Lesson 00 Start here: the warm-up check accepts the reference and names wrong answers."""

import torch

from helpers.checks import start as checks
from helpers.reference import start as ref
from tests.wrong_answers import Accept, Reject


def ratio_inverted(celsius):
    return celsius * 5 / 9 + 32


def offset_first(celsius):
    return (celsius + 32) * 9 / 5


def as_list(celsius):
    return (celsius * 9 / 5 + 32).tolist()


CASES = [
    Accept(checks.check_to_fahrenheit, ref.to_fahrenheit),
    Reject(checks.check_to_fahrenheit, ratio_inverted, "ratio is upside down"),
    Reject(checks.check_to_fahrenheit, offset_first, "add 32 after multiplying"),
    Reject(checks.check_to_fahrenheit, as_list, "should return a tensor"),
]


# ---------------------------------------------------------------- correct answers written differently (issue 18)


def fahrenheit_decimal(celsius):
    return celsius * 1.8 + 32


def fahrenheit_methods(celsius):
    return celsius.mul(9).div(5).add(32)


def fahrenheit_loop(celsius):
    print("converting", celsius.numel(), "temperatures")  # an extra print is fine
    flat = [value * 9 / 5 + 32 for value in celsius.flatten()]
    return torch.stack(flat).reshape(celsius.shape) if flat else celsius.clone()


def fahrenheit_offset_first(celsius):
    return (celsius + 160 / 9) * 9 / 5  # the same formula, factored


CASES += [
    Accept(checks.check_to_fahrenheit, fahrenheit_decimal),
    Accept(checks.check_to_fahrenheit, fahrenheit_methods),
    Accept(checks.check_to_fahrenheit, fahrenheit_loop),
    Accept(checks.check_to_fahrenheit, fahrenheit_offset_first),
]


# ---------------------------------------------------------------- rules of issue 18


def fahrenheit_in_place(celsius):
    return celsius.mul_(9 / 5).add_(32)  # writes into the caller's tensor


def fahrenheit_float32(celsius):
    return celsius.float() * 9 / 5 + 32


def hidden_fahrenheit(fn):
    checks.check_to_fahrenheit(fn, inputs=[torch.tensor([-273.15, 1000.0], dtype=torch.float64), torch.zeros(2, 2, 2),
                                           torch.tensor(36.5)])


CASES += [
    Reject(checks.check_to_fahrenheit, fahrenheit_in_place, "its values were overwritten"),
    Accept(hidden_fahrenheit, ref.to_fahrenheit),
    Accept(hidden_fahrenheit, fahrenheit_decimal),
    Accept(hidden_fahrenheit, fahrenheit_loop),
    Reject(hidden_fahrenheit, fahrenheit_float32, "dtype"),
    Reject(hidden_fahrenheit, fahrenheit_in_place, "its values were overwritten"),
]

CASES += [Accept(hidden_fahrenheit, fahrenheit_methods)]


# ---------------------------------------------------------------- round 4: floor division (an independent learner's class)


def fahrenheit_int_factor(celsius):
    return celsius * int(9 / 5) + 32  # the factor truncated to 1


def fahrenheit_floor_divided(celsius):
    return celsius * 9 // 5 + 32  # rounds every result down


def fahrenheit_true_divide(celsius):
    return torch.true_divide(celsius * 9, 5) + 32


CASES += [
    Reject(checks.check_to_fahrenheit, fahrenheit_int_factor, "as if the factor were 1"),
    Reject(hidden_fahrenheit, fahrenheit_int_factor, "as if the factor were 1"),
    Reject(checks.check_to_fahrenheit, fahrenheit_floor_divided, "floor division"),
    Accept(checks.check_to_fahrenheit, fahrenheit_true_divide),
]


# From a fifth learner tester (lesson 00, 36 answers).
def fahrenheit_rounded_to_cents(celsius):
    return torch.round((celsius * 9 / 5 + 32) * 100) / 100  # "to tidy up"


def fahrenheit_rounded_to_one_decimal(celsius):
    return torch.round(celsius * 9 / 5 + 32, decimals=1)


def fahrenheit_in_half(celsius):
    return (celsius.half() * 9 / 5 + 32).to(celsius.dtype)


def fahrenheit_by_index(celsius):
    out = torch.empty_like(celsius)
    for i in range(len(celsius)):  # len() of a 0-d tensor raises
        out[i] = celsius[i] * 9 / 5 + 32
    return out


def fahrenheit_float64_factor(celsius):
    """Right for tensors with dimensions (a 0-d float64 factor does not promote them), but a 0-d float32 input meets
    a 0-d float64 factor as an equal, and comes back float64: the hidden 0-d case shows the changed dtype."""
    return celsius * torch.tensor(9 / 5, dtype=torch.float64) + 32


CASES += [
    Reject(checks.check_to_fahrenheit, fahrenheit_rounded_to_cents, "rounded to 2 decimals"),
    Reject(checks.check_to_fahrenheit, fahrenheit_rounded_to_one_decimal, "rounded to 1 decimal"),
    Reject(checks.check_to_fahrenheit, fahrenheit_in_half, "every value of yours is one float16 can hold"),
    Reject(hidden_fahrenheit, fahrenheit_by_index, "len() of a 0-d tensor"),
    Accept(checks.check_to_fahrenheit, fahrenheit_float64_factor),
    Reject(hidden_fahrenheit, fahrenheit_float64_factor, "should have dtype torch.float32, but yours has dtype torch.float64"),
]
