"""Command-line pieces shared by the in-process commands (``cli.py``) and the Spark
ones (``spark/cli.py``)."""

from __future__ import annotations

import argparse
import sys


class Deprecated(argparse.Action):
    """An old spelling of an option: stores into the new one's destination (appending,
    with ``append``) and prints a one-line hint (docs/cli.md, "One vocabulary")."""

    def __init__(self, option_strings, dest, new: str, append: bool = False, **kwargs) -> None:
        self.new, self.append = new, append
        kwargs.setdefault("help", argparse.SUPPRESS)  # not shown: docs/cli.md lists them
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        print(f"xcep: hint: {option_string} is deprecated, use {self.new}", file=sys.stderr)
        if self.append:
            values = [*(getattr(namespace, self.dest, None) or []), values]
        setattr(namespace, self.dest, values)
