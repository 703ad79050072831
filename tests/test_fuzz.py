"""A fixed-seed sample of the fuzzing campaign (tests/fuzz.py; ``make fuzz`` runs
10,000+ cases): no internal error, no hang, no good document lost; and the faults the
campaign found, each as a test of its own."""

from __future__ import annotations

import json

import pytest
from tests.fuzz import campaign, run_cli


def test_a_sample_of_the_campaign_finds_nothing() -> None:
    report = campaign(cases=400, seed=20261125)
    assert report["failures"] == []
    assert sum(c.get("ok", 0) for c in report["counts"].values()) > 300


def test_a_bad_document_among_concatenated_json_costs_only_itself(tmp_path) -> None:
    """Found by the campaign: in a .json of documents on one line, a bad one (NaN, too
    deep, a stray byte-order mark) lost every document after it on that line."""
    bad = [b'{"id": "b", "v": [NaN]}', b'{"id": "b", "v": ' + b"[" * 3000 + b"]" * 3000 + b"}"]
    for doc in bad:
        data = tmp_path / "in.json"
        data.write_bytes(b'{"id": "g0"} ' + doc + b' {"id": "g1"} {"id": "g2"}\n')
        status, out, err = run_cli(["xseq", "/json/id/text()", str(data)])
        assert status == 1 and "document 1" in err
        assert [json.loads(line)[0] for line in out.splitlines()] == ["g0", "g1", "g2"]


@pytest.mark.parametrize(
    "query",
    ["return c from //$T", "return $T@id from //$T where c = 1", "return count(/$X) from //t/$X"],
)
def test_a_path_with_nothing_to_start_from_is_a_query_error(tmp_path, query) -> None:
    """Found by the campaign: a relative path in a return term or the where clause ended
    the run as an internal error; it is a query error with its column."""
    data = tmp_path / "in.xml"
    data.write_text('<t id="g0"><c/></t>')
    status, _, err = run_cli(["xseq", query, str(data)])
    assert status == 2 and "has no node to start from" in err and "column" in err


def test_a_count_option_too_large_is_refused(tmp_path) -> None:
    """Found by the campaign: --max-depth 99999999999999999999 overflowed a C long."""
    data = tmp_path / "in.xml"
    data.write_text("<t/>")
    status, _, err = run_cli(["events", "--max-depth", "99999999999999999999", str(data)])
    assert status == 2 and "at most 2,147,483,647" in err


def test_an_error_found_inside_the_next_declaration_costs_only_its_document(tmp_path) -> None:
    """Found by the campaign: a document cut inside a literal (here an entity value) runs
    into the next document's XML declaration, where expat reports the error; resuming
    after the error lost that next document. It resumes at the first declaration after
    the bad document's start."""
    good = "".join(f'<?xml version="1.0"?>\n<t id="g{i}"/>\n' for i in range(3))
    data = tmp_path / "in.xml"
    data.write_text('<?xml version="1.0"?>\n<!DOCTYPE t [<!ENTITY e "\n' + good)
    status, out, err = run_cli(["xseq", "/t/@id", str(data)])
    assert status == 1 and "document 0" in err
    assert [json.loads(line)[0] for line in out.splitlines()] == ["g0", "g1", "g2"]


def test_a_subdirectory_that_cannot_be_listed_is_reported(tmp_path, monkeypatch) -> None:
    """An unreadable subdirectory of an input directory was skipped silently; it is
    reported like an unreadable file, and the other files are read. (Tests run as root,
    who can list anything: the listing is made to fail.)"""
    import os

    (tmp_path / "sub").mkdir()
    (tmp_path / "a.xml").write_text('<t id="g0"/>')
    (tmp_path / "sub" / "b.xml").write_text('<t id="g1"/>')
    real = os.scandir

    def scandir(path="."):
        if str(path).endswith("sub"):
            raise PermissionError(13, "Permission denied", str(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)
    status, out, err = run_cli(["xseq", "/t/@id", str(tmp_path)])
    assert status == 1 and out == '["g0"]\n'
    assert "sub: cannot list the directory: Permission denied" in err


def test_ctrl_c_inside_a_library_ends_as_interrupted(monkeypatch, tmp_path) -> None:
    """Ctrl-C during DuckDB's work ended as 'internal error: CatalogException' (its
    cleanup failing after the interruption): any error raised while handling an
    interruption, or DuckDB's InterruptException, ends the run with 130."""
    import xcep.cli as cli

    class InterruptException(Exception):  # as duckdb names it
        pass

    def interrupted(args, stdout, stderr):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise RuntimeError("Catalog Error: Table with name batch does not exist") from None

    def duckdb_interrupted(args, stdout, stderr):
        raise InterruptException("INTERRUPT Error: Interrupted!")

    data = tmp_path / "in.xml"
    data.write_text("<t/>")
    for command in (interrupted, duckdb_interrupted):
        monkeypatch.setattr(cli, "cmd_events", command)
        status, _, err = run_cli(["events", str(data)])
        assert status == 130 and "internal error" not in err
