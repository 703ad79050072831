import gzip
import io
import json
import os
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xcep.cli import main

XML_STREAM = (
    b'<?xml version="1.0"?>\n<a id="1">x</a>\n'
    b'<?xml version="1.0"?>\n<a><b></a>\n'
    b'<?xml version="1.0"?>\n<c/>\n'
)


def run(*args, stdin: bytes = b"") -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "xcep", *args], input=stdin, capture_output=True, check=False
    )


def test_events_as_json_lines_from_stdin():
    result = run("events", "--output-format", "jsonl", stdin=b"<a id='1'>x</a>")
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert rows == [
        {"doc": 0, "kind": "open", "name": "a", "depth": 1, "node": 0},
        {"doc": 0, "kind": "attr", "name": "id", "value": "1", "depth": 2, "node": 1},
        {"doc": 0, "kind": "text", "value": "x", "depth": 2, "node": 2},
        {"doc": 0, "kind": "close", "name": "a", "depth": 1, "node": 0},
    ]


def test_malformed_document_is_reported_in_one_line_and_the_rest_still_printed():
    result = run("events", stdin=XML_STREAM)
    assert result.returncode == 1
    docs = sorted({json.loads(line)["doc"] for line in result.stdout.splitlines()})
    assert docs == [0, 2]
    lines = result.stderr.decode().splitlines()
    assert lines == ["xcep: error: <stdin>, document 1, line 4, column 9: mismatched tag"]


def test_errors_skip_is_quiet_and_fail_stops():
    skipped = run("events", "--errors", "skip", stdin=XML_STREAM)
    assert (skipped.returncode, skipped.stderr) == (0, b"")
    assert b'"doc":2' in skipped.stdout
    failed = run("events", "--errors=fail", stdin=XML_STREAM)
    assert failed.returncode == 1
    assert b'"doc":2' not in failed.stdout
    assert failed.stderr.count(b"\n") == 1 and b"Traceback" not in failed.stderr


def test_errors_deadletter_keeps_the_bad_document(tmp_path):
    dead = tmp_path / "dead.jsonl"
    result = run("events", f"--errors=deadletter:{dead}", stdin=XML_STREAM)
    assert result.returncode == 0
    rows = [json.loads(line) for line in dead.read_text().splitlines()]
    assert len(rows) == 1
    assert rows[0]["doc"] == 1 and rows[0]["line"] == 4
    assert rows[0]["document"] == '<?xml version="1.0"?>\n<a><b></a>\n'


def test_bad_errors_option_is_a_usage_error():
    result = run("events", "--errors", "explode")
    assert result.returncode == 2
    assert b"--errors must be" in result.stderr


def test_missing_file_is_reported_and_other_inputs_still_read(tmp_path):
    good = tmp_path / "good.xml"
    good.write_text("<a/>")
    result = run("events", str(tmp_path / "nope.xml"), str(good))
    assert result.returncode == 1
    assert b"nope.xml: No such file or directory" in result.stderr
    assert result.stdout.count(b"\n") == 2


def test_directory_of_mixed_inputs(tmp_path):
    (tmp_path / "b.jsonl").write_text('{"t": 1}\n{"t": 2}\n')
    (tmp_path / "a.xml.gz").write_bytes(gzip.compress(b"<a/>"))
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "c.json").write_text('{"t": 3}')
    (tmp_path / ".hidden.xml").write_text("<hidden/>")
    (tmp_path / "notes.txt").write_text("not data")
    result = run("events", str(tmp_path))
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    roots = [(r["doc"], r["name"]) for r in rows if r["kind"] == "open" and r["depth"] == 1]
    assert roots == [(0, "a"), (1, "json"), (2, "json"), (3, "json")]


def test_stats(capsys, tmp_path):
    path = tmp_path / "s.xml"
    path.write_text("<a><b>1</b><b>2</b></a><a/>")
    assert main(["events", "--stats", "--output-format", "jsonl", str(path)]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["documents"] == 2
    assert (stats["open_events"], stats["text_events"], stats["max_depth"]) == (4, 2, 3)
    assert stats["bytes"] == path.stat().st_size
    assert main(["events", "--stats", str(path)]) == 0
    assert "documents" in capsys.readouterr().out


def test_text_format(capsys):
    import io

    sys_stdin = sys.stdin
    try:
        sys.stdin = io.TextIOWrapper(io.BytesIO(b'<a k="v">t<b/></a>'))
        assert main(["events", "--output-format", "text"]) == 0
    finally:
        sys.stdin = sys_stdin
    assert capsys.readouterr().out.splitlines() == [
        "0\t<a>",
        '0\t  @k="v"',
        '0\t  "t"',
        "0\t  <b>",
        "0\t  </b>",
        "0\t</a>",
    ]


@pytest.mark.parametrize("limit, code", [("3", 0), ("2", 1)])
def test_max_depth_option(limit, code):
    result = run("events", "--max-depth", limit, stdin=b"<a><b><c/></b></a>")
    assert result.returncode == code


def test_progress_bar_when_asked(tmp_path):
    path = tmp_path / "p.xml"
    path.write_text("<a>" + "<b>x</b>" * 50_000 + "</a>")
    shown = run("events", "--stats", "--progress", str(path))
    assert shown.returncode == 0 and b"B/s" in shown.stderr
    assert b"B/s" not in run("events", "--stats", str(path)).stderr  # not a terminal


def test_broken_pipe_is_quiet(tmp_path):
    path = tmp_path / "big.xml"
    path.write_text("<a>" + "<b>x</b>" * 200_000 + "</a>")
    pipe = subprocess.run(
        f"{sys.executable} -m xcep events {path} | head -1",
        shell=True,
        capture_output=True,
        check=False,
    )
    assert pipe.stdout.count(b"\n") == 1
    assert pipe.stderr == b""


def test_the_output_is_whole_when_the_process_ends(tmp_path):
    """``xcep`` ends without the interpreter's teardown (``cli.run``): what it wrote is
    flushed first, to the last line, and its report on stderr too."""
    filters, data = tmp_path / "filters.txt", tmp_path / "data.xml"
    filters.write_text("1 /a[b = 1]\n2 //b\n")
    data.write_bytes(b"<a><b>1</b></a>\n" * 5_000)  # (a file: no wait for input flushes)
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    command = [sys.executable, "-m", "xcep", "filter", "--filters", str(filters), "--stats=json"]
    result = subprocess.run(  # (stdout buffered, as a user's shell has it)
        [*command, str(data)],
        capture_output=True,
        env=environment,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert [row["doc"] for row in rows] == list(range(5_000))
    assert all(row["matches"] == [1, 2] for row in rows)
    assert json.loads(result.stderr.splitlines()[-1])["documents"] == 5_000


FILTERS = (
    "# id filter\n1 //a[b/text()=1 and ../a[@c>2]]\n2 //a[@c>2 and b/text()=1]\nbad /a[\n10 /a\n"
)
PUBSUB = b'<a> <b> 1 </b> <a c="3"> <b> 1 </b> </a> </a>\n<a/>\n<b/>\n<a><b></a>\n<c/>'


def test_filter_outputs_one_line_per_good_document(tmp_path):
    filters = tmp_path / "filters.txt"
    filters.write_text(FILTERS)
    result = run("filter", "--filters", str(filters), "--stats=json", stdin=PUBSUB)
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert rows == [
        {"doc": 0, "matches": [1, 2, 10]},
        {"doc": 1, "matches": [10]},
        {"doc": 2, "matches": []},
        {"doc": 4, "matches": []},
    ]
    errors = result.stderr.decode().splitlines()
    assert errors[0] == (
        f"xcep: error: {filters}, line 4, filter bad, column 4: "
        "expected a step (a name, *, @name, @*, text(), . or ..), found the end"
    )
    assert "document 3" in errors[1]
    stats = json.loads(errors[-1])
    assert stats["filters"] == 3 and stats["documents"] == 4 and 0 <= stats["hit_ratio"] <= 1
    assert result.returncode == 1


def test_filter_strict_and_option_errors(tmp_path):
    filters = tmp_path / "filters.txt"
    filters.write_text(FILTERS)
    strict = run("filter", "--filters", str(filters), "--strict", stdin=b"<a/>")
    assert strict.returncode == 1 and strict.stdout == b""
    assert b"line 4, filter bad, column 4" in strict.stderr
    no_dtd = run("filter", "--filters", str(filters), "--order", stdin=b"<a/>")
    assert no_dtd.returncode == 2 and b"--order needs --dtd" in no_dtd.stderr


def test_filter_with_every_optimisation_gives_the_same_answers(tmp_path, data_dir):
    filters = tmp_path / "filters.txt"
    filters.write_text(
        "1 /site/regions//item[location='United States' and quantity > 1]\n"
        "2 //person[profile/@income > 50000]/name\n"
        "3 //open_auction[not(reserve)]/bidder[increase >= 10]\n"
        "4 /site/people/person[starts-with(emailaddress, 'mailto:A')]\n"
    )
    xmark = str(data_dir / "xmark" / "xmark-f0.01.xml")
    dtd = str(data_dir / "xmark" / "auction.dtd")
    plain = run("filter", "--filters", str(filters), "--no-top-down", xmark)
    tuned = run(
        "filter", "--filters", str(filters), "--order", "--early", "--train", "--dtd", dtd, xmark
    )
    assert plain.returncode == tuned.returncode == 0, plain.stderr + tuned.stderr
    assert (
        json.loads(plain.stdout) == json.loads(tuned.stdout) == {"doc": 0, "matches": [1, 2, 3, 4]}
    )


# ---------- standard input streams (issue 26) ----------


def _first_line_while_the_input_is_open(command: list[str], first: bytes, second: bytes) -> str:
    """Write one document into a pipe, wait for the first answer, then write the next:
    the answer must come while the producer still holds the pipe open."""
    import select

    child = subprocess.Popen(
        [sys.executable, "-m", "xcep", *command],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        child.stdin.write(first)
        child.stdin.flush()
        ready, _, _ = select.select([child.stdout], [], [], 30)
        assert ready, f"{command}: no answer while the input stayed open"
        line = child.stdout.readline().decode()
        child.stdin.write(second)
        child.stdin.close()
        assert child.wait(30) == 0, child.stderr.read().decode()
        return line
    finally:
        child.kill()


@pytest.mark.parametrize(
    "command, first, second",
    [
        (["filter", "--filters", "FILTERS"], b"<t><k>v</k></t>\n", b"<t/>\n"),
        (["filter", "--filters", "FILTERS", "--input-format", "jsonl"], b'{"k": "v"}\n', b"{}\n"),
        (["xseq", "/t/k"], b"<t><k>v</k></t>\n", b"<t><k>w</k></t>\n"),
        (["events"], b"<t/>\n", b"<u/>\n"),
    ],
)
def test_a_pipe_gets_each_answer_when_its_document_ends(tmp_path, command, first, second):
    filters = tmp_path / "filters.txt"
    filters.write_text("a\t/t[k = 'v']\nb\t//k\n")
    command = [str(filters) if part == "FILTERS" else part for part in command]
    line = _first_line_while_the_input_is_open(command, first, second)
    assert json.loads(line)  # the first document's answer (or first event), whole


@pytest.mark.parametrize(
    "command, expected",
    [
        (["xseq", "/stocks/t/@id"], ["1"]),
        (["xseq", "return $T@id from /stocks/$T[@id = '1']"], ["1"]),
        (["events"], {"doc": 0, "kind": "open", "name": "stocks", "depth": 1, "node": 0}),
    ],
)
def test_a_feed_whose_root_never_closes_is_answered_as_it_comes(command, expected):
    """An endless single document: what it decides is answered while its root is open."""
    first, second = b'<stocks><t id="1"/>\n', b'<t id="2"/></stocks>\n'
    assert json.loads(_first_line_while_the_input_is_open(command, first, second)) == expected


def test_a_million_piped_documents_take_the_memory_of_one():
    """Memory is bounded by the largest document, not by the input: 1,000,000 small
    documents through a pipe take about what 1,000 do."""

    def peak_rss_mb(documents: int) -> float:
        script = (  # VmHWM: the process's own peak (ru_maxrss counts the forking parent's)
            "import atexit, re, runpy, sys;"
            "atexit.register(lambda: print(re.search(r'VmHWM:\\s*(\\d+)',"
            " open('/proc/self/status').read())[1], file=sys.stderr));"
            "sys.argv = ['xcep', 'events', '--stats'];"
            "runpy.run_module('xcep', run_name='__main__')"
        )
        producer = subprocess.Popen(
            [
                sys.executable,
                "-c",
                f"import sys\nfor i in range({documents}): "
                "sys.stdout.write(f'<t id=\"{i}\"><k>v</k></t>\\n')",
            ],
            stdout=subprocess.PIPE,
        )
        done = subprocess.run(
            [sys.executable, "-c", script], stdin=producer.stdout, capture_output=True, check=False
        )
        producer.wait()
        assert b"documents" in done.stdout
        return int(done.stderr.decode().split()[-1]) / 1024

    small, large = peak_rss_mb(1_000), peak_rss_mb(1_000_000)
    assert large < small + 20, (small, large)


# ---------- files that are not UTF-8 (issue 28) ----------


def test_a_line_that_is_not_utf8_costs_only_itself(tmp_path):
    """A bad byte on one line of a filters or queries file is reported with its file,
    line and column; the other lines are served."""
    filters = tmp_path / "filters.txt"
    filters.write_bytes(b"a\t/t\n\xff\tbad\nb\t/t[k]\n")
    done = run("filter", "--filters", str(filters), stdin=b"<t><k/></t>")
    assert json.loads(done.stdout) == {"doc": 0, "matches": ["a", "b"]}
    assert done.returncode == 1
    assert f"{filters}, line 2, column 1: not UTF-8" in done.stderr.decode()

    queries = tmp_path / "queries.txt"
    queries.write_bytes(b"q\t/t/k\n\xfe\n")
    done = run("xseq", "--queries", str(queries), stdin=b"<t><k/></t>")
    assert json.loads(done.stdout) == ["q", "<k/>"]
    assert f"{queries}, line 2, column 1: not UTF-8" in done.stderr.decode()

    xscl = tmp_path / "xscl.txt"
    xscl.write_bytes(b"q1\tS//t->x[//k->a] FOLLOWED BY{a=b, 10} S//t->y[//k->b]\n\xff\n")
    done = run("xscl", "--queries", str(xscl), stdin=b"<t><k>1</k></t><t><k>1</k></t>")
    assert json.loads(done.stdout)["query"] == "q1"
    assert f"{xscl}, line 2, column 1: not UTF-8" in done.stderr.decode()


def test_a_query_file_that_is_not_utf8_is_named_with_its_line_and_column(tmp_path):
    query = tmp_path / "q.xseq"
    query.write_bytes(b"/t\n/k\xff")
    done = run("xseq", f"@{query}", stdin=b"<t/>")
    assert done.returncode != 0
    assert done.stderr.decode().strip() == (
        f"xcep: error: {query}, line 2, column 3: not UTF-8: invalid start byte (byte 0xff)"
    )


def test_an_xseq_path_of_thousands_of_steps_runs(tmp_path):
    """Attaching a query's states is a loop: 5,000 steps (past the recursion limit)."""
    query = tmp_path / "long.xseq"
    query.write_text("/a" * 5000)
    done = run("xseq", f"@{query}", stdin=b"<a><a/></a>")
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout == b""


@pytest.mark.parametrize(
    "args",
    [
        ["filter", "--filters", "F", "--max-entries", "-1"],
        ["filter", "--filters", "F", "--max-depth", "0"],
        ["xscl", "--queries", "F", "--batch", "0"],
        ["xscl", "--queries", "F", "--state-budget", "many"],
    ],
)
def test_counts_below_one_are_usage_errors(tmp_path, args):
    """A budget, a depth or a batch of less than 1 is refused at once (issue 28)."""
    path = tmp_path / "f.txt"
    path.write_text("a\t/t\n")
    done = run(*[str(path) if a == "F" else a for a in args], stdin=b"<t/>")
    assert done.returncode == 2
    assert "expected" in done.stderr.decode().splitlines()[-1]


def test_runs_in_parallel_share_one_deadletter_file(tmp_path):
    """Eight runs append their bad documents to one file: all eight lines are kept."""
    dead = tmp_path / "dead.jsonl"
    runs = [
        subprocess.Popen(
            [sys.executable, "-m", "xcep", "events", f"--errors=deadletter:{dead}"],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(8)
    ]
    for child in runs:
        child.communicate(XML_STREAM)
    lines = dead.read_text().splitlines()
    assert len(lines) == 8 and all(json.loads(line)["doc"] == 1 for line in lines)


@pytest.mark.parametrize("seed", range(5))
def test_events_lines_are_the_events_as_json(seed):
    """The JSON Lines writer (straight from the columns) writes what ``Event.to_dict``
    says, for names and values with quotes, escapes, control and non-ASCII characters."""
    import random
    from xml.sax.saxutils import quoteattr

    from xcep.commands import _events_jsonl
    from xcep.events import EventStream

    rnd = random.Random(seed)
    texts = ['a"b', "c\\d", "tab\there", "ünï ☃", "x&amp;y", "&#10;", " ", "line\nnext"]
    docs = []
    for _ in range(20):
        text = rnd.choice(texts)
        attribute = quoteattr(rnd.choice(texts))
        docs.append(f"<r a={attribute}><é-n>{text}</é-n><m/>{rnd.choice(texts)}</r>")
    data = "\n".join(docs).encode()
    quoted: list[str] = []
    for batch in EventStream([io.BytesIO(data)], batch_size=7, keep_whitespace=True).batches():
        want = [json.dumps(e.to_dict(), ensure_ascii=False, separators=(",", ":")) for e in batch]
        assert _events_jsonl(batch, quoted) == want
    assert quoted  # the names were encoded once, kept between batches


def test_version_says_which_compiled_kernels_are_in_use():
    from xcep.kernels import KERNELS, kernel_status

    done = run("--version")
    lines = done.stdout.decode().splitlines()
    assert done.returncode == 0 and lines[0].startswith("xcep ")
    status = kernel_status()
    assert len(lines) == 1 + len(KERNELS)
    for what, why in status.items():
        assert f"  {what}: {'compiled' if why is None else why}" in lines


def test_record_path_answers_per_record_in_process(tmp_path) -> None:
    """--record-path for the in-process commands: one answer per record of one large
    document, as on Spark."""
    import io

    people = "".join(f'<person id="p{i}"><age>{20 + i}</age></person>' for i in range(5))
    data = tmp_path / "site.xml"
    data.write_text(f'<site><people>{people}</people><other><person id="x"/></other></site>')
    filters = tmp_path / "f.txt"
    filters.write_text("young\t/person[age < 22]\nall\t/person\n")
    records = ["--record-path", "/site/people/person", str(data)]
    out = io.StringIO()
    assert main(["filter", "--filters", str(filters), *records], out) == 0
    answers = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [a["doc"] for a in answers] == [0, 1, 2, 3, 4]
    assert [sorted(a["matches"]) for a in answers][:3] == [["all", "young"]] * 2 + [["all"]]
    out = io.StringIO()
    assert main(["xseq", "/person/@id", *records], out) == 0
    assert out.getvalue().split() == [f'["p{i}"]' for i in range(5)]
    out = io.StringIO()
    assert main(["xseq", "/person/@id", "--record-path", "site//person", str(data)], out) == 2


def test_stats_are_one_format_in_every_command(tmp_path) -> None:
    """--stats: a table in events, filter and xseq; --stats=json: one JSON line; a value
    after --stats that is no format is the next argument."""
    import contextlib
    import io

    data = tmp_path / "d.xml"
    data.write_text('<t id="1"/>')
    filters = tmp_path / "f.txt"
    filters.write_text("a\t/t\n")
    commands = {
        "events": (["events"], "stdout"),
        "filter": (["filter", "--filters", str(filters)], "stderr"),
        "xseq": (["xseq"], "stderr"),
    }
    for name, (argv, where) in commands.items():
        for fmt in ("", "=json"):
            out, err = io.StringIO(), io.StringIO()
            query = ["/t/@id"] if name == "xseq" else []
            with contextlib.redirect_stderr(err):
                assert main([*argv, f"--stats{fmt}", *query, str(data)], out) == 0
            text = (out if where == "stdout" else err).getvalue().splitlines()
            if fmt:
                stats = json.loads(text[-1])
                assert isinstance(stats, dict) and "mb_per_s" in stats
            else:
                assert "MB/s" in text[-1] or any(line.startswith("MB/s") for line in text)
                assert all("{" not in line for line in text)


def test_old_spellings_still_work_with_a_hint(tmp_path, capsys) -> None:
    """One vocabulary (docs/cli.md): the old spellings are deprecated aliases."""
    data = tmp_path / "d.xml"
    data.write_text('<t id="1"/>')
    assert main(["events", "--format", "text", str(data)]) == 0
    assert "--format is deprecated, use --output-format" in capsys.readouterr().err
    queries = tmp_path / "q.txt"
    queries.write_text("q1\tS/t->x1\n")
    assert main(["xscl", "--queries", str(queries), "--stream", "S", str(data)]) == 0
    captured = capsys.readouterr()
    assert "--stream is deprecated, use --stream-name" in captured.err
    assert '"query": "q1"' in captured.out or '"query":"q1"' in captured.out


@settings(max_examples=300)
@given(
    st.lists(
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
            lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
            max_leaves=12,
        ),
        max_size=4,
    )
)
def test_compact_json_writes_what_json_dumps_writes(values):
    """``compact_json`` and ``json_lines`` (in C: the events kernel, rows it cannot write
    handed to ``compact_json``; and without it) write what ``json.dumps`` writes, a row
    a line, alone or after a first value."""
    from xcep.commands import compact_json, json_lines

    def dumps(value) -> str:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))

    assert list(compact_json()(values)) == [dumps(value) for value in values]
    firsts = [f"q{i}" if i % 2 else i for i in range(len(values))]
    rows = [value if isinstance(value, list) else [value] for value in values]
    rows += [("\ud800", 1.5), ["\x00\u2028\\"]]  # a lone surrogate passes, as json writes it
    firsts += [-1, None]
    for compiled in (True, False):
        lines = json_lines(compiled)
        assert lines(values) == "".join(dumps(value) + "\n" for value in values)
        pairs = zip(firsts, rows, strict=True)
        expected = "".join(dumps([first, *row]) + "\n" for first, row in pairs)
        assert lines(rows, firsts) == expected
