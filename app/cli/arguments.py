"""Argument types shared by the command line's parsers: each turns one flag's text into a checked value."""

from __future__ import annotations

import argparse


def positive_whole_number(value: str) -> int:
    """A whole number of at least 1, or argparse's error saying what was expected."""
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {value!r}") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"expected at least 1, got {number}")
    return number
