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
    checks.check_to_fahrenheit(fn, inputs=[torch.tensor([-273.15, 1000.0], dtype=torch.float64), torch.zeros(2, 2, 2)])


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
