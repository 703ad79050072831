"""XSeq values: comparisons, arithmetic and aggregates, shared by the engine and the reference.

A value is a string (attribute values, text, tag names, string values) or a
number (constants, arithmetic, aggregates). A comparison is numeric when both
sides are numbers or strings that read as numbers (``"12.5"``), else it
compares strings by code point. An operand that yields several values (a path
selecting several nodes) compares existentially, as in XPath; an empty
operand makes every comparison false.
"""

from __future__ import annotations

import math
import operator

COMPARISONS = {  # XSeq comparison operators
    "=": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


def to_number(value) -> float | None:
    """``value`` as a finite float, or ``None`` when it does not read as a number."""
    if value.__class__ is float:
        return value if math.isfinite(value) else None
    try:
        number = float(value)  # surrounding whitespace is allowed, as in XPath
    except (ValueError, TypeError):
        return None
    if not math.isfinite(number) or (value.__class__ is str and "_" in value):
        return None  # 'inf', 'nan' and Python's '1_000' are not numbers here
    return number


def compare_one(op: str, left, right) -> bool:
    a, b = to_number(left), to_number(right)
    if a is not None and b is not None:
        return COMPARISONS[op](a, b)
    return COMPARISONS[op](as_string(left), as_string(right))


def compare(op: str, left: list, right: list) -> bool:
    """The general (existential) comparison of two value lists."""
    if len(left) == 1 and len(right) == 1:
        return compare_one(op, left[0], right[0])
    return any(compare_one(op, a, b) for a in left for b in right)


def arith(op: str, left: list, right: list) -> list:
    """``left op right`` on the first value of each side, as numbers; empty when not numbers."""
    if not left or not right:
        return []
    a, b = to_number(left[0]), to_number(right[0])
    if a is None or b is None:
        return []
    if op == "+":
        return [a + b]
    if op == "-":
        return [a - b]
    if op == "*":
        return [a * b]
    return [a / b] if b else []


def as_string(value) -> str:
    """A value as comparisons see it as a string (numbers as XPath writes them)."""
    if isinstance(value, float):
        return str(format_number(value))  # 4.0 as "4", as XPath writes numbers
    return str(value)


def format_number(value: float):
    """A number for output: an int when it is integral, else the float."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    return value


class Aggregate:
    """One aggregate over the values of many matches: max, min, count, sum or avg.

    count counts values; sum and avg add the values that read as numbers and
    skip the others; max and min compare numerically while every value reads
    as a number, else as strings. An aggregate over no values is ``None``
    (count: 0).
    """

    __slots__ = ("all_numeric", "count", "func", "numbers", "numeric", "strings", "total")

    def __init__(self, func: str) -> None:
        self.func = func
        self.count = 0
        self.total = 0.0
        self.numeric = 0
        self.all_numeric = True
        self.numbers: tuple | None = None  # (min, max) of the values as numbers
        self.strings: tuple | None = None  # (min, max) of the values as strings

    def add(self, values: list) -> None:
        for value in values:
            self.count += 1
            text = as_string(value)
            low, high = self.strings or (text, text)
            self.strings = (min(low, text), max(high, text))
            number = to_number(value)
            if number is None:
                self.all_numeric = False
                continue
            self.total += number
            self.numeric += 1
            low, high = self.numbers or (number, number)
            self.numbers = (min(low, number), max(high, number))

    def result(self):
        if self.func == "count":
            return self.count
        if self.func == "sum":
            return format_number(self.total)
        if self.func == "avg":
            return format_number(self.total / self.numeric) if self.numeric else None
        if self.strings is None:
            return None
        index = 1 if self.func == "max" else 0
        if self.all_numeric:
            return format_number(self.numbers[index])
        return self.strings[index]
