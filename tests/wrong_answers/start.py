"""Lesson 00 Start here: the warm-up check accepts the reference and names wrong answers."""

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
