"""The fuzzing campaign (issue 28): bad input costs only itself, and nothing crashes.

``python -m tests.fuzz --cases 10000 --seed 1`` (``make fuzz``) runs generated
cases through the CLI's ``main`` in this process and reports counts per family;
``tests/test_fuzz.py`` runs a small fixed-seed sample under ``make test``.
Every case checks that no ``internal error`` is reported and no exception
escapes, within ``TIME_LIMIT`` seconds (else it counts as a hang). The families:

- **stream-xml**: documents with XML declarations, one of them mutated (bytes
  deleted, inserted, replaced, truncated; tags broken; bad entities, DOCTYPEs,
  invalid UTF-8) and put at a random place: the good documents' answers
  (``xcep xseq '/t/@id'``) equal the answers without the bad one;
- **stream-lines**: the same, one document per line and no declarations: a
  bad document that leaves an element unclosed takes the documents after it
  (docs/events.md); counted apart as *documented losses*, never as failures;
- **stream-jsonl**, **stream-json**: JSON Lines records and concatenated JSON
  documents, one mutated (NaN, lone surrogates, bad bytes, BOMs, truncation,
  deep nesting), the good records' answers kept;
- **hostile**: entity bombs, external entities, nesting past ``--max-depth``,
  many attributes, long names, put among good documents;
- **query-xseq**, **query-xquery**, **query-filter**, **query-xscl**: the
  seed queries of each language mutated character by character, run on a
  small input: any outcome but a crash;
- **options**: option values drawn at random (negative, huge, junk).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import random
import signal
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from xcep.cli import main

TIME_LIMIT = 20  # seconds a case may take before it counts as a hang
JUNK = [b"\xff", b"\x00", b"<", b">", b"&", b"]]>", b"&#0;", b"\xc3", b"<!--", b"<?x", b'"', b"\n"]


class Hang(BaseException):  # not an Exception: main() must not report it as its own
    pass


def _alarm(signum, frame):
    raise Hang


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    """``xcep argv`` in this process: (exit status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            status = main(argv, out)
        except SystemExit as exc:  # argparse refusing an option
            status = exc.code if isinstance(exc.code, int) else 2
    return status, out.getvalue(), err.getvalue()


# --- documents and their mutations -------------------------------------------------


def good_xml(rng: random.Random, ident: str) -> bytes:
    values = "".join(f"<v n='{rng.randrange(9)}'>{rng.choice('abc')}&amp;{i}</v>" for i in range(3))
    return f'<t id="{ident}">{values}<w/></t>'.encode()


def mutate(rng: random.Random, data: bytes) -> bytes:
    """One to three random faults in ``data``."""
    for _ in range(rng.randint(1, 3)):
        at = rng.randrange(len(data) + 1)
        kind = rng.randrange(9)
        if kind == 0:  # delete a range
            data = data[:at] + data[at + rng.randint(1, 8) :]
        elif kind == 1:  # insert junk
            data = data[:at] + rng.choice(JUNK) + data[at:]
        elif kind == 2:  # replace a byte
            data = data[:at] + bytes([rng.randrange(256)]) + data[at + 1 :]
        elif kind == 3:  # truncate
            data = data[:at]
        elif kind == 4:  # a mismatched end tag
            data = data.replace(b"</v>", b"</q>", 1)
        elif kind == 5:  # an undefined or recursive entity
            data = data[:at] + rng.choice([b"&nope;", b"&#xD800;", b"&#99999999;"]) + data[at:]
        elif kind == 6:  # a DOCTYPE in the wrong place, or a bad one
            data = b'<!DOCTYPE t [<!ENTITY e "&e;">]>' + data.replace(b">", b">&e;", 1)
        elif kind == 7:  # an attribute twice
            data = data.replace(b'id="b"', b'id="b" id="c"', 1)
        else:  # invalid UTF-8 in a name
            data = data.replace(b"<w/>", b"<w\xe9\xff/>", 1)
    return data


def hostile(rng: random.Random) -> bytes:
    kind = rng.randrange(6)
    if kind == 0:  # billion laughs
        lol = '<!ENTITY a0 "lol">' + "".join(
            f'<!ENTITY a{i} "{f"&a{i - 1};" * 10}">' for i in range(1, 10)
        )
        return f"<!DOCTYPE t [{lol}]><t id='b'>&a9;</t>".encode()
    if kind == 1:  # an external entity
        return b'<!DOCTYPE t [<!ENTITY x SYSTEM "file:///etc/passwd">]><t id="b">&x;</t>'
    if kind == 2:  # deeper than --max-depth
        depth = rng.choice([150, 2000])
        return b"<t id='b'>" + b"<d>" * depth + b"</d>" * depth + b"</t>"
    if kind == 3:  # many attributes
        return (
            b"<t id='b' " + b" ".join(b"a%d='1'" % i for i in range(rng.choice([10, 5000]))) + b"/>"
        )
    if kind == 4:  # a long name
        name = b"n" * rng.choice([100, 100_000])
        return b"<t id='b'><" + name + b"/></t>"
    return b"<t id='b'>" + b"x" * rng.choice([10, 1_000_000]) + b"</t>"


def good_json(rng: random.Random, ident: str) -> bytes:
    record = {"id": ident, "v": [rng.randrange(9) for _ in range(3)], "o": {"k": "a&b"}}
    return json.dumps(record).encode()


def mutate_json(rng: random.Random, data: bytes) -> bytes:
    kind = rng.randrange(7)
    if kind == 0:
        return data.replace(b"[", b"[NaN, ", 1)
    if kind == 1:
        return data.replace(b'"a&b"', b'"\\ud800"', 1)
    if kind == 2:
        return b"\xef\xbb\xbf" + data
    if kind == 3:
        return b'{"id": "b", "deep": ' + b"[" * 3000 + b"]" * 3000 + b"}"
    if kind == 4:
        return data.replace(b"Infinity", b"x").replace(b"3", b"Infinity", 1)
    return mutate(rng, data)


# --- the families ------------------------------------------------------------------


COMMANDS = ("xseq", "filter", "xquery", "events")


def _command(command: str, root: str, query: str, good: list, path: Path, work: Path):
    """(argv, reader of the good documents' ids from stdout) for one command."""
    if command == "xseq":
        return ["xseq", query, str(path)], _ids
    if command == "filter":
        test = "id = '{}'" if root == "json" else "@id = '{}'"
        lines = [f"{g}\t/{root}[{test.format(g)}]" for g in good]
        (work / "filters.txt").write_text("\n".join(lines) + "\n")
        return ["filter", "--filters", str(work / "filters.txt"), str(path)], _matches
    if command == "xquery":
        value = "$d/id" if root == "json" else "$d/@id"
        text = f"for $d in $input/{root} return string({value})"
        return ["xquery", text, str(path)], _items
    return ["events", str(path)], _event_ids


def _matches(stdout: str) -> list[str]:
    return [m for line in stdout.splitlines() for m in json.loads(line)["matches"]]


def _items(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith("g")]


def _event_ids(stdout: str) -> list[str]:
    """The ids in an event stream: attribute id (XML), the text in an id member (JSON)."""
    found, after_id = [], False
    for line in stdout.splitlines():
        event = json.loads(line)
        kind = event["kind"]
        is_id = (kind == "attr" and event["name"] == "id") or (kind == "text" and after_id)
        if is_id and str(event.get("value", "")).startswith("g"):
            found.append(event["value"])
        after_id = kind == "open" and event.get("name") == "id"
    return found


def _ids(stdout: str) -> list[str]:
    found = []
    for line in stdout.splitlines():
        value = json.loads(line)[0]
        if isinstance(value, str) and value.startswith("g"):
            found.append(value)
    return found


def _stream_case(rng: random.Random, work: Path, family: str) -> str:
    """A stream with one bad document: 'ok', 'lost' (good answers lost) or 'documented'."""
    count = rng.randint(2, 8)
    place = rng.randrange(count + 1)
    good = [f"g{i}" for i in range(count)]
    if family in ("stream-jsonl", "stream-json"):
        docs = [good_json(rng, g) for g in good]
        bad = mutate_json(rng, good_json(rng, "b"))
        docs.insert(place, bad)
        sep = b"\n" if family == "stream-jsonl" else b" "
        path = work / ("in.jsonl" if family == "stream-jsonl" else "in.json")
        path.write_bytes(sep.join(docs) + b"\n")
        query = "/json/id/text()"
    else:
        docs = [good_xml(rng, g) for g in good]
        bad = hostile(rng) if family == "hostile" else mutate(rng, good_xml(rng, "b"))
        docs.insert(place, bad)
        if family == "stream-lines":
            data = b"\n".join(docs) + b"\n"
        else:
            data = b"".join(b'<?xml version="1.0"?>\n' + d + b"\n" for d in docs)
        path = work / "in.xml"
        path.write_bytes(data)
        query = "/t/@id"
    command = rng.choice(COMMANDS)
    root = "json" if family in ("stream-jsonl", "stream-json") else "t"
    argv, read = _command(command, root, query, good, path, work)
    status, out, err = run_cli(argv)
    if "internal error" in err or status not in (0, 1):
        return "crash"
    found = read(out)
    if found == good:
        return "ok"
    if family in ("stream-lines", "stream-json") and _took_the_next(found, good, place):
        return "documented"  # an unclosed bad document took the ones right after it
    return "lost"


def _took_the_next(found: list, good: list, place: int) -> bool:
    """Whether ``found`` is ``good`` less some documents right after the bad one: what an
    unclosed document costs where nothing frames documents (docs/events.md)."""
    return any(found == good[:place] + good[place + k :] for k in range(1, len(good) + 1))


SEED_QUERIES = {
    "query-xseq": [
        "/t[@id = 'g1']/v/text()",
        "return $X@n, count($X) from //t/$X where $X@n > 3",
        "return count($Z) from /t /$Z (\\ $X)* where $X@n < prev($X)@n partition by /t/v@n",
        "return $T@id from //$T[v/text() = 'a&1' or not(w)]",
    ],
    "query-xquery": [
        "for $v in /t/v where $v/@n > 2 return string($v)",
        "for tumbling window $w in /t/v start at $s when true() end at $e when $e - $s = 1 "
        "return count($w)",
        "declare function local:f($x) { $x * 2 }; local:f(count(//v))",
        "let $a := (1, 2, 3) return sum($a[. > 1])",
        "declare variable $w as xs:integer := 3; declare function local:f($x) "
        "{ if ($x le 1) then 1 else $x * local:f($x - 1) }; local:f($w)",
        "for $x allowing empty at $i in () group by $k as xs:integer := $i return $k",
    ],
    "query-filter": ["q1 /t[v/@n = 3]", "q2 //v[text() = 'a&1']", "q3 /t[count(v) > 2 and w]"],
    "query-xscl": [
        "q1\tS/t->x1[/v->x2] JOIN{x2 = y2, 10} S/t->y1[/v->y2]",
        "q2\tSELECT x1 FROM S//t->x1[/w] FOLLOWED BY{x1/@id = y1/@id, 5s} S/t->y1",
        "q3\tS/t/@id->x1",
    ],
}


def _mutate_text(rng: random.Random, text: str) -> str:
    alphabet = "()[]{}$@/\\*=<>!'\",.;: abcnxvtw0123456789-+|&#"
    for _ in range(rng.randint(1, 3)):
        at = rng.randrange(len(text) + 1)
        kind = rng.randrange(3)
        if kind == 0:
            text = text[:at] + text[at + rng.randint(1, 3) :]
        elif kind == 1:
            text = text[:at] + rng.choice(alphabet) + text[at:]
        else:
            text = text[:at] + rng.choice(alphabet) + text[at + 1 :]
    return text


def _query_case(rng: random.Random, work: Path, family: str) -> str:
    query = _mutate_text(rng, rng.choice(SEED_QUERIES[family]))
    data = work / "in.xml"
    data.write_bytes(b"".join(good_xml(rng, f"g{i}") + b"\n" for i in range(3)))
    if family == "query-xseq":
        argv = ["xseq", query, str(data)]
    elif family == "query-xquery":
        argv = ["xquery", query, str(data)]
    elif family == "query-filter":
        (work / "filters.txt").write_text(query + "\n", encoding="utf-8", errors="replace")
        argv = ["filter", "--filters", str(work / "filters.txt"), str(data)]
    else:
        (work / "queries.txt").write_text(query + "\n", encoding="utf-8", errors="replace")
        argv = ["xscl", "--queries", str(work / "queries.txt"), "--stream-name", "S", str(data)]
    status, _, err = run_cli(argv)
    return "crash" if "internal error" in err or status not in (0, 1, 2) else "ok"


OPTIONS = [
    ("xseq", "--max-depth"),
    ("filter", "--max-entries"),
    ("events", "--max-depth"),
    ("xscl", "--batch"),
    ("xscl", "--state-budget"),
]


def _options_case(rng: random.Random, work: Path, family: str) -> str:
    command, option = rng.choice(OPTIONS)
    value = rng.choice(["-1", "0", "1", "99999999999999999999", "abc", "", "1e3", "auto", "nan"])
    data = work / "in.xml"
    data.write_bytes(good_xml(rng, "g0"))
    if command == "xseq":
        argv = ["xseq", "/t/@id", option, value, str(data)]
    elif command == "filter":
        (work / "f.txt").write_text("q1 /t\n")
        argv = ["filter", "--filters", str(work / "f.txt"), option, value, str(data)]
    elif command == "events":
        argv = ["events", option, value, str(data)]
    else:
        (work / "q.txt").write_text("q1\tS/t/@id->x1\n")
        argv = ["xscl", "--queries", str(work / "q.txt"), option, value, str(data)]
    status, _, err = run_cli(argv)
    return "crash" if "internal error" in err or status not in (0, 1, 2) else "ok"


FAMILIES = {
    "stream-xml": _stream_case,
    "stream-lines": _stream_case,
    "stream-jsonl": _stream_case,
    "stream-json": _stream_case,
    "hostile": _stream_case,
    "query-xseq": _query_case,
    "query-xquery": _query_case,
    "query-filter": _query_case,
    "query-xscl": _query_case,
    "options": _options_case,
}


def campaign(cases: int, seed: int, log=None) -> dict:
    """Run ``cases`` generated cases (round-robin over the families): counts per family
    and outcome ('ok', 'documented', 'lost', 'crash', 'hang'), and the failing cases."""
    counts: dict = {family: Counter() for family in FAMILIES}
    failures: list = []
    old = signal.signal(signal.SIGALRM, _alarm)
    start = time.perf_counter()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            families = list(FAMILIES)
            for i in range(cases):
                family = families[i % len(families)]
                rng = random.Random(f"{seed}-{i}")
                signal.alarm(TIME_LIMIT)
                try:
                    outcome = FAMILIES[family](rng, work, family)
                except Hang:
                    outcome = "hang"
                except Exception as exc:  # escaped main(): a crash
                    outcome = f"crash: {type(exc).__name__}: {exc}"[:200]
                finally:
                    signal.alarm(0)
                key = outcome if not outcome.startswith("crash:") else "crash"
                counts[family][key] += 1
                if key in ("lost", "crash", "hang"):
                    failures.append((family, seed, i, outcome))
                if log is not None and (i + 1) % 500 == 0:
                    log(f"{i + 1}/{cases} cases, {len(failures)} failures")
    finally:
        signal.signal(signal.SIGALRM, old)
    return {
        "cases": cases,
        "seed": seed,
        "seconds": round(time.perf_counter() - start, 1),
        "counts": {f: dict(c) for f, c in counts.items()},
        "failures": failures,
    }


def _main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz")
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    report = campaign(args.cases, args.seed, log=lambda m: print(m, file=sys.stderr))
    print(json.dumps(report, indent=1))
    totals = Counter()
    for counts in report["counts"].values():
        totals.update(counts)
    print(
        f"{args.cases} cases in {report['seconds']} s: {totals['ok']} ok, "
        f"{totals['documented']} documented losses, {totals['lost']} good documents lost, "
        f"{totals['crash']} internal errors, {totals['hang']} hangs",
        file=sys.stderr,
    )
    return 1 if report["failures"] else 0


if __name__ == "__main__":
    sys.exit(_main())
