"""The error model (docs/errors.md): every error class has a code from the table and an
exit code; a query's error is a QueryError (and a ValueError) in every language, with
its position; the command line's status comes from the class."""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import xcep
from xcep.errors import (
    CODES,
    EXIT_INPUT,
    EXIT_USAGE,
    QueryError,
    XcepError,
    _not_utf8,
    text_blocks,
    text_lines,
)

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


def _lines_one_at_a_time(path):
    """The reference of ``text_lines``: the file's lines as the file object splits them,
    each decoded alone."""
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, 1):
            if number == 1:
                raw = raw.removeprefix(b"\xef\xbb\xbf")
            try:
                yield number, raw.decode("utf-8").rstrip("\r\n"), None
            except UnicodeDecodeError as exc:
                _, column, message = _not_utf8(exc, raw)
                yield number, None, (column, message)


@settings(max_examples=300)
@given(
    st.lists(
        st.sampled_from(
            [b"a", b"\n", b"\r\n", b"\r", b"\xef\xbb\xbf", b"\xff", b"\xc3\xa9", b"\xc3", b" x"]
        ),
        max_size=30,
    ),
    st.sampled_from([1, 2, 3, 4, 7, 1 << 22]),
)
def test_text_read_a_block_at_a_time_is_read_line_by_line(tmp_path_factory, pieces, size):
    """``text_blocks`` decodes a block of lines at once (a line by itself only where the
    block is not UTF-8): the same lines, numbers and errors as decoding each line alone,
    whatever the block size."""
    path = tmp_path_factory.mktemp("lines") / "text"
    path.write_bytes(b"".join(pieces))
    blocks = [
        (number, text, bad.get(number))
        for first, texts, bad in text_blocks(path, size)
        for number, text in enumerate(texts, first)
    ]
    assert blocks == list(_lines_one_at_a_time(path))
    assert list(text_lines(path)) == blocks
