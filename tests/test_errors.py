"""The error model (docs/errors.md): every error class has a code from the table and an
exit code; a query's error is a QueryError (and a ValueError) in every language, with
its position; the command line's status comes from the class."""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path

import pytest

import xcep
from xcep.errors import CODES, EXIT_INPUT, EXIT_USAGE, QueryError, XcepError

DOCS = Path(__file__).resolve().parent.parent / "docs" / "errors.md"


def _error_classes() -> set[type]:
    for info in pkgutil.walk_packages(xcep.__path__, "xcep."):
        if ".spark" in info.name or ".serve" in info.name or info.name.endswith("__main__"):
            continue  # (they define no error class; importing them pulls in pyspark)
        importlib.import_module(info.name)
    found, todo = set(), [XcepError]
    while todo:
        cls = todo.pop()
        found.add(cls)
        todo += cls.__subclasses__()
    return found


def test_every_error_class_has_a_code_in_the_table_and_the_docs():
    classes = _error_classes()
    assert len(classes) >= 12
    documented = set(re.findall(r"XCEP\d{4}", DOCS.read_text()))
    for cls in classes:
        if cls.__name__ == "XQueryError":
            continue  # W3C codes, given per error
        assert cls.code in CODES, cls
        assert cls.code in documented, cls
        assert cls.exit_code in (EXIT_INPUT, EXIT_USAGE), cls
    assert set(CODES) <= documented


def _first_error(make):
    with pytest.raises(QueryError) as caught:
        make()
    return caught.value


@pytest.mark.parametrize(
    "language, make, column",
    [
        ("filter", lambda: __import__("xcep.xpush", fromlist=["x"]).Workload({1: "/a[b = ]"}), 8),
        ("xseq", lambda: __import__("xcep.xseq", fromlist=["x"]).XSeqEngine("/a[@b = ]"), 9),
        (
            "xscl",
            lambda: __import__("xcep.xscl", fromlist=["x"]).XsclEngine().add("q", "S/a->x JOIN"),
            None,
        ),
        ("xquery", lambda: __import__("xcep.xquery", fromlist=["x"]).compile("for $x in"), None),
    ],
)
def test_a_query_error_is_one_shape_in_every_language(language, make, column):
    error = _first_error(make)
    assert isinstance(error, ValueError) and error.language in (language, "filter")
    assert error.code and error.message in str(error)
    assert error.column is not None and error.column >= 1
    if column is not None:  # (the ']' where a value should be)
        assert error.column == column, str(error)


def test_exit_codes_come_from_the_class(tmp_path):
    from xcep.cli import main

    bad = tmp_path / "bad.xml"
    bad.write_text("<a><b></a>")
    assert main(["xseq", "/a[", str(bad)]) == EXIT_USAGE  # a query that does not parse
    assert main(["xseq", "/a/b", str(bad)]) == EXIT_INPUT  # a bad document
    assert main(["xquery", "1 idiv 0", str(bad)]) == EXIT_INPUT  # a dynamic error
    assert main(["xquery", "1 +", str(bad)]) == EXIT_USAGE  # a static one
