"""Command-line pieces shared by the in-process commands (``cli.py``) and the Spark
ones (``spark/cli.py``)."""

from __future__ import annotations

import argparse
import re
import sys
from typing import TextIO

from xcep.errors import EXIT_INPUT as EXIT_INPUT  # (the exit codes: re-exported)
from xcep.errors import EXIT_INTERRUPTED as EXIT_INTERRUPTED
from xcep.errors import EXIT_OK as EXIT_OK
from xcep.errors import EXIT_USAGE as EXIT_USAGE
from xcep.errors import read_text


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


def query_text(spec: str) -> str:
    """QUERY on the command line: the text itself, or @FILE."""
    if spec.startswith("@"):
        return read_text(spec[1:])
    return spec


def plan_of_lines(kind: str, lines, **options) -> tuple:
    """The plan of a query file's ``(id, text, line)`` lines (``skip_invalid``), and
    ``(line, id, message)`` for each line left out: an id given again, a query that does
    not compile."""
    from xcep.plans import compile_plan

    queries: dict = {}
    line_of: dict = {}
    bad = []
    for qid, text, line in lines:
        if qid in queries:
            bad.append((line, qid, f"query id {qid} is already registered"))
        else:
            queries[qid], line_of[qid] = text, line
    plan = compile_plan(kind, queries, skip_invalid=True, **options)
    bad += [(line_of[qid], qid, str(error)) for qid, error in plan.invalid.items()]
    return plan, bad


def load_xscl_queries(path: str, stderr: TextIO, **options) -> tuple:
    """The plan (``xcep.plans``, with ``options``) of the ``ID<TAB>XSCL`` lines of
    ``path``, and the errors of the bad lines (reported on ``stderr``): a bad line is
    left out."""
    from xcep.xscl import read_queries

    lines, errors = read_queries(path)
    plan, bad = plan_of_lines("xscl", lines, **options)
    errors += [f"line {line}, {message}" for line, _, message in bad]
    errors.sort(key=lambda error: int(re.match(r"line (\d+)", error).group(1)))
    for error in errors:
        print(f"xcep: error: {path}, {error}", file=stderr)
    return plan, errors


def stream_inputs(inputs: list[str], default: str) -> list[tuple[str, str]]:
    """``NAME=PATH`` puts an input on stream NAME; a bare path is on the default stream."""
    out = []
    for item in inputs:
        name, sep, path = item.partition("=")
        if sep and name.isidentifier():
            out.append((name, path))
        else:
            out.append((default, item))
    return out


QUERY_FILES = {"filter": "--filters", "xseq": "--xseq", "xquery": "--xquery", "xscl": "--xscl"}


def add_query_files(command) -> None:
    """``--filters``, ``--xseq``, ``--xquery``, ``--xscl FILE``: standing queries of every
    kind (``xcep run``, ``xcep spark run``)."""
    for flag in QUERY_FILES.values():
        command.add_argument(flag, metavar="FILE", help=f"ID<TAB>query per line ({flag[2:]})")


def standing_queries(args, stderr: TextIO) -> dict | None:
    """kind → id → text of the files ``add_query_files`` took (None: none was given,
    reported on ``stderr``)."""
    from xcep.plans import read_query_file

    paths = {kind: getattr(args, flag[2:]) for kind, flag in QUERY_FILES.items()}
    if not any(paths.values()):
        print("xcep: error: give queries: --filters, --xseq, --xquery or --xscl FILE", file=stderr)
        return None
    return {kind: read_query_file(path) for kind, path in paths.items() if path}
