"""Hostile documents: entity bombs, external entities and DTDs, deep nesting."""

import json
import re
import subprocess
import sys

import pytest

from xcep.errors import InputError
from xcep.events import Kind, parse

BILLION_LAUGHS = """<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
 <!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
 <!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">
 <!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">
 <!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">
 <!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">
]>
<lolz>&lol9;</lolz>
"""

MEASURE = """
import json, re, sys, time
from xcep.events import parse
from xcep.errors import InputError
def peak_kb():  # VmHWM: this process's own peak (ru_maxrss also counts the forking parent)
    return int(re.search(r"VmHWM:\\s*(\\d+)", open("/proc/self/status").read())[1])
text = sys.stdin.read()
before = peak_kb()
start = time.perf_counter()
try:
    parse(text)
    outcome = "parsed"
except InputError as exc:
    outcome = str(exc)
seconds = time.perf_counter() - start
grown_kb = peak_kb() - before
print(json.dumps({"outcome": outcome, "seconds": seconds, "grown_kb": grown_kb}))
"""


def _measure(text: str) -> dict:
    run = subprocess.run(
        [sys.executable, "-c", MEASURE], input=text, capture_output=True, text=True, check=True
    )
    return json.loads(run.stdout)


def test_billion_laughs_fails_fast_and_small():
    result = _measure(BILLION_LAUGHS)
    assert re.search(r"would expand to [\d,]+ characters \(limit 1,000,000\)", result["outcome"])
    assert result["seconds"] < 1.0
    assert result["grown_kb"] < 100 * 1024


def test_quadratic_blowup_is_bounded_by_the_amplification_limit():
    big = "x" * 500_000
    text = f'<!DOCTYPE a [<!ENTITY e "{big}">]><a>{"&e;" * 20_000}</a>'  # 10 GB of text
    result = _measure(text)
    assert "amplification" in result["outcome"]  # ours or expat's own guard, whichever first
    assert result["seconds"] < 5.0
    assert result["grown_kb"] < 100 * 1024


def test_external_entity_is_never_read(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET")
    xml = f'<!DOCTYPE a [<!ENTITY x SYSTEM "{secret.as_uri()}">]><a>&x;</a>'
    with pytest.raises(InputError, match="external entity") as info:
        parse(xml)
    assert "TOP-SECRET" not in str(info.value)


def test_external_dtd_and_parameter_entities_are_never_read(tmp_path):
    dtd = tmp_path / "evil.dtd"
    dtd.write_text('<!ENTITY leak "TOP-SECRET">')
    for xml in (
        f'<!DOCTYPE a SYSTEM "{dtd.as_uri()}"><a>&leak;</a>',
        f'<!DOCTYPE a [<!ENTITY % p SYSTEM "{dtd.as_uri()}"> %p;]><a>&leak;</a>',
    ):
        with pytest.raises(InputError, match="undefined entity '&leak;'"):
            parse(xml)
    # a DOCTYPE naming an external DTD is fine when nothing needs it
    events = parse(f'<!DOCTYPE a SYSTEM "{dtd.as_uri()}"><a>ok</a>')
    assert [e.value for e in events if e.kind is Kind.TEXT] == ["ok"]


def test_entity_limit_is_configurable():
    xml = '<!DOCTYPE a [<!ENTITY e "0123456789">]><a>&e;</a>'
    assert parse(xml)[1].value == "0123456789"
    with pytest.raises(InputError, match=r"'e' would expand to 10 characters \(limit 5\)"):
        parse(xml, max_entity_chars=5)


def test_amplification_limit_is_configurable():
    text = f'<!DOCTYPE a [<!ENTITY e "{"y" * 100_000}">]><a>{"&e;" * 30}</a>'
    assert len(parse(text)[1].value) == 3_000_000
    with pytest.raises(InputError, match="amplification limit 2"):
        parse(text, max_amplification=2)


@pytest.mark.parametrize("compiled", [True, False])
def test_too_many_attributes_cost_their_document_only(compiled):
    """``max_attributes`` (10,000 by default) refuses an element with more, located at its
    tag; the documents around it are read. Both tokenizers (the compiled one counts a long
    tag's attributes before reading any; expat's path checks what expat hands over)."""
    import io

    from xcep.events import EventStream

    def document(n: int) -> str:
        return "<r " + " ".join(f'a{i}="{i}"' for i in range(n)) + "/>"

    for limit, n in ((10_000, 10_000), (10_000, 10_001), (70, 71), (70, 70), (3, 4)):
        data = f"<ok/>\n<x>\n  {document(n)}</x>\n<ok/>\n".encode()
        errors = []
        stream = EventStream(
            [io.BytesIO(data)], errors=errors.append, compiled=compiled, max_attributes=limit
        )
        docs = sorted({doc for batch in stream.batches() for doc in batch.docs})
        if n <= limit:
            assert docs == [0, 1, 2] and not errors
        else:
            assert docs == [0, 2]
            assert [(e.doc, e.line, e.column) for e in errors] == [(1, 3, 3)]
            assert f"more than the limit of {limit} attributes" in str(errors[0])


def test_a_million_attributes_are_refused_in_little_memory():
    """One element with 1,000,000 attributes (12 MB): refused before its attributes take
    memory (the issue's bound: 3× the document plus 100 MB)."""
    text = "<r " + " ".join(f'a{i}="v"' for i in range(1_000_000)) + "/>"
    result = _measure(text)
    assert "more than the limit of 10000 attributes" in result["outcome"]
    assert result["grown_kb"] < (3 * len(text) >> 10) + 100 * 1024


def _peak_rss_mb(argv: list[str], stdin: bytes) -> float:
    """Peak RSS of ``xcep ARGV`` in a process of its own (reading ``stdin``): its VmHWM,
    the high-water mark of its own memory (``ru_maxrss`` would count the parent's, as
    it was when forked: Linux keeps it across exec)."""
    script = (
        "import atexit, re, runpy, sys;"
        "atexit.register(lambda: print(re.search(r'VmHWM:\\s*(\\d+)',"
        " open('/proc/self/status').read())[1], file=sys.stderr));"
        f"sys.argv = ['xcep', *{argv!r}];"
        "runpy.run_module('xcep', run_name='__main__')"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], input=stdin, capture_output=True, check=False
    )
    return int(done.stderr.decode().split()[-1]) / 1024


def test_a_50_mb_text_node_in_a_join_takes_a_few_times_its_size(tmp_path):
    """A 50 MB text node joined by xscl (the issue: 200 MB took 1.1 GB): within 3× its
    size plus 100 MB."""
    queries = tmp_path / "q.txt"
    queries.write_text("q1\tS/t->x1[/v->x2] JOIN{x2 = y2, 10} S/t->y1[/v->y2]\n")
    data = b"<t><v>" + b"x" * 50_000_000 + b"</v></t>\n<t><v>1</v></t>\n"
    peak = _peak_rss_mb(["xscl", "--queries", str(queries), "--stream-name", "S", "-"], data)
    assert peak < 3 * 50 + 100, peak
