"""The engines on Spark give what they give in-process (or what lxml gives), as multisets."""

import gzip
import json
import os
import random
from collections import Counter
from pathlib import Path

import pytest
from lxml import etree

from xcep.events import EventStream
from xcep.spark.filter import filter_units
from xcep.spark.sinks import read_output, write
from xcep.spark.sources import read_units
from xcep.spark.xquery import xquery_units
from xcep.spark.xseq import RESULT_SCHEMA, xseq_units
from xcep.xseq import XSeqEngine


def _uri(path) -> str:
    return f"file:{os.path.abspath(path)}"  # as given: links are not resolved (docs/spark.md)


def _lxml_matches(document: bytes, filters: dict) -> list:
    tree = etree.ElementTree(etree.fromstring(document))
    return sorted(fid for fid, text in filters.items() if etree.XPath(f"boolean({text})")(tree))


@pytest.fixture(scope="module")
def xmark_messages(data_dir):
    from bench.xpush_workload import split_documents

    return split_documents(data_dir / "xmark" / "xmark-f0.01.xml")


@pytest.mark.parametrize("seed", [1, 2])
def test_filtering_on_spark_agrees_with_lxml(spark, tmp_path, xmark_messages, seed):
    from bench.xpush_workload import FilterGenerator, as_stream

    rng = random.Random(seed)
    docs = rng.sample(xmark_messages, 10)
    filters = dict(enumerate(FilterGenerator(docs, seed=seed).workload(30, predicates=1)))
    (tmp_path / "many.xml").write_bytes(as_stream(docs[:4]))  # four documents in one file
    for i, doc in enumerate(docs[4:8]):
        (tmp_path / f"one-{i}.xml").write_bytes(doc)
    (tmp_path / "z.xml.gz").write_bytes(gzip.compress(docs[8]))
    (tmp_path / "bad.xml").write_bytes(b"<person><name>x</person>")
    (tmp_path / "notes.txt").write_bytes(docs[9])  # not a data file: not read
    want = {
        _uri(tmp_path / "many.xml") + f"#{i}": _lxml_matches(d, filters)
        for i, d in enumerate(docs[:4])
    }
    want |= {
        _uri(tmp_path / f"one-{i}.xml"): _lxml_matches(d, filters) for i, d in enumerate(docs[4:8])
    }
    want[_uri(tmp_path / "z.xml.gz")] = _lxml_matches(docs[8], filters)

    rows = filter_units(read_units(spark, str(tmp_path)), filters).collect()
    got = {r.doc_id: r.matches for r in rows if r.error is None}
    assert got == want
    [bad] = [r for r in rows if r.error is not None]
    assert bad.doc_id == _uri(tmp_path / "bad.xml") and "mismatched tag" in bad.error


def test_filtering_records_of_one_large_document(spark, data_dir):
    path = data_dir / "xmark" / "xmark-f0.01.xml"
    filters = {
        1: "/person[address/country = 'United States']",
        2: "/person[profile/@income > 50000]",
        3: "/person[emailaddress and not(homepage)]",
        4: "//interest",
    }
    people = etree.parse(str(path)).xpath("/site/people/person")
    want = {
        f"{_uri(path)}#{i}": _lxml_matches(etree.tostring(p), filters) for i, p in enumerate(people)
    }
    units = read_units(spark, str(path), record_path="/site/people/person")
    got = {r.doc_id: r.matches for r in filter_units(units, filters, train=False).collect()}
    assert got == want
    assert any(got.values()) and not all(got.values())  # the filters tell people apart


def _stock_files(directory, files: int, per_file: int, seed: int) -> list:
    rng = random.Random(seed)
    os.makedirs(directory, exist_ok=True)
    paths = []
    for f in range(files):
        path = os.path.join(directory, f"{f:03}.xml")
        with open(path, "w") as out:
            out.write("<stocks>")
            for _ in range(per_file):
                company = rng.choice("ABCD")
                price = rng.randrange(20)
                out.write(
                    f'<transaction company="{company}" price="{price}"><v>{price}</v></transaction>'
                )
                if rng.random() < 0.1:
                    out.write('<transaction price="1"/>')  # no company: in no partition
            out.write("</stocks>")
        os.utime(path, (1_000_000 + f, 1_000_000 + f))  # arrival order = name order
        paths.append(path)
    return paths


def _in_process(query: str, selection: str, paths: list, per_document: bool = False) -> Counter:
    engine = XSeqEngine(query, selection)
    runs = [[p] for p in paths] if per_document else [paths]
    rows = [row for run in runs for row in engine.run(EventStream(run).batches())]
    return Counter(json.dumps(r, sort_keys=True) for r in rows)


def _spark_rows(rows) -> Counter:
    texts = (r.row if isinstance(r.row, str) else r.row.toJson() for r in rows if r.row)
    return Counter(json.dumps(json.loads(t), sort_keys=True) for t in texts)


FALLING = (
    "return $Z@price, $Y@price from /stocks /$Z (\\ $Y)* where $Y@price < prev($Y)@price "
    "partition by /stocks/transaction@company"
)
XSEQ_CASES = [
    (FALLING, "all"),
    (FALLING, "maximal"),
    (
        "return $X@company, count($X), max($X@price) from /stocks/$X "
        "partition by /stocks/transaction@company",
        "all",
    ),
    ("return $X/v/text() from //transaction$X where $X@price > 15", "all"),  # per document
    ("return count($X), avg($X@price) from //transaction$X", "all"),  # aggregates: one stream
]


@pytest.mark.parametrize(("query", "selection"), XSEQ_CASES)
def test_xseq_on_spark_equals_in_process(spark, tmp_path, query, selection):
    paths = _stock_files(tmp_path, 3, 40, seed=len(query) + len(selection))
    per_document = "partition" not in query and "count" not in query
    want = _in_process(query, selection, paths, per_document)
    rows = xseq_units(read_units(spark, str(tmp_path)), query, selection).collect()
    assert not [r.error for r in rows if r.error]
    assert _spark_rows(rows) == want and sum(want.values()) > 0
    if per_document:
        assert {r.doc_id for r in rows} <= {_uri(p) for p in paths}


def test_xseq_partitions_of_records(spark, tmp_path):
    paths = _stock_files(tmp_path, 2, 60, seed=7)
    want = _in_process(FALLING, "maximal", paths)
    units = read_units(spark, str(tmp_path), record_path="/stocks/transaction")
    rows = xseq_units(units, FALLING, "maximal", record_path="/stocks/transaction").collect()
    assert _spark_rows(rows) == want


def test_xseq_streaming_keeps_partitions_across_micro_batches(spark, tmp_path):
    inputs = tmp_path / "in"
    paths = _stock_files(inputs, 5, 30, seed=11)
    want = _in_process(FALLING, "all", paths)
    units = read_units(spark, str(inputs), stream=True, max_files_per_trigger=2)
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")
    write(xseq_units(units, FALLING, "all"), out, "json", checkpoint=checkpoint)
    assert len(os.listdir(tmp_path / "checkpoint" / "commits")) >= 3  # several micro-batches
    assert _spark_rows(read_output(spark, out, schema=RESULT_SCHEMA).collect()) == want


def _kill_after_commits(command: list, checkpoint, commits_wanted: int) -> int:
    """Run a streaming CLI job in micro-batches, SIGKILL it once ``commits_wanted``
    micro-batches are committed; the number committed when it died."""
    import signal
    import subprocess
    import time

    first = subprocess.Popen(
        [*command, "--trigger", "1 second"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    commits = checkpoint / "commits"

    def committed() -> int:
        return len([c for c in os.listdir(commits) if c.isdigit()]) if commits.is_dir() else 0

    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and first.poll() is None:
        if committed() >= commits_wanted:
            break
        time.sleep(0.2)
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    return committed()


def test_a_killed_streaming_job_restarts_without_loss_or_duplicates(spark, tmp_path):
    """SIGKILL a partitioned XSeq streaming job mid-run, restart it from its checkpoint."""
    import subprocess
    import sys

    inputs, out, checkpoint = tmp_path / "in", tmp_path / "out", tmp_path / "checkpoint"
    paths = _stock_files(inputs, 8, 25, seed=5)
    command = [
        sys.executable, "-m", "xcep", "spark", "xseq", FALLING, str(inputs),
        "--output", str(out), "--stream", "--checkpoint", str(checkpoint),
        "--max-files-per-trigger", "1", "--master", "local[1]",
        "--conf", "spark.sql.shuffle.partitions=1",
    ]  # fmt: skip
    done = _kill_after_commits(command, checkpoint, 2)
    assert 2 <= done < len(paths)  # killed mid-run, with input left to do

    second = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert second.returncode == 0, second.stderr[-2000:]
    got = _spark_rows(read_output(spark, str(out), schema=RESULT_SCHEMA).collect())
    assert got == _in_process(FALLING, "all", paths)
    # quiet by default: none of Spark's start-up warnings (loopback, native Hadoop, profile)
    assert not [line for line in second.stderr.splitlines() if " WARN " in line or "log4j" in line]


def _shop_log(path, events: int, seed: int) -> None:
    rng = random.Random(seed)
    with open(path, "w") as out:
        out.write("<log>")
        for i in range(events):
            operation = rng.choice(["Login", "Search", "Search", "Buy", "Logout"])
            out.write(f'<event operation="{operation}" uid="{rng.randrange(6)}" time="{i}"/>')
        out.write("</log>")


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_xquery_partitions_on_spark_equal_in_process(spark, tmp_path, seed):
    from xcep import xquery

    query = (Path(__file__).parents[1] / "examples" / "search-no-buy.xq").read_text()
    _shop_log(tmp_path / "log.xml", 300, seed)
    want = Counter(xquery.compile(query).run([str(tmp_path / "log.xml")]))
    units = read_units(spark, str(tmp_path))
    rows = xquery_units(units, query, "/log/event", "@uid").collect()
    assert Counter(r.item for r in rows) == want and sum(want.values()) > 0
    keys = {r.key for r in rows}
    assert all(f'uid="{r.key}"' in r.item for r in rows) and len(keys) > 1


def test_xquery_per_document_and_its_errors(spark, tmp_path):
    _shop_log(tmp_path / "a.xml", 20, 1)
    (tmp_path / "b.xml").write_text("<log><event uid='1'/></log>")
    rows = xquery_units(
        read_units(spark, str(tmp_path)), "count(//event) div count(//event[@time])"
    ).collect()
    by_doc = {r.doc_id: (r.item, r.error) for r in rows}
    assert by_doc[_uri(tmp_path / "a.xml")] == ("1", None)
    item, error = by_doc[_uri(tmp_path / "b.xml")]  # 1 div 0: a dynamic error, this document only
    assert item is None and "FOAR0001" in error


@pytest.mark.parametrize("seed", [3, 4, 5, 6])
def test_xscl_on_spark_equals_the_sequential_reference(spark, tmp_path, seed):
    from test_xscl import three_level, two_level
    from xcep.spark.xscl import xscl_units
    from xcep.testing.xscl_sequential import SequentialEngine
    from xcep.xscl import parse_document

    rng = random.Random(seed)
    make_query, make_document = (two_level, three_level)[seed % 2](rng)
    queries = [(f"q{i}", make_query(i)) for i in range(8)] + [("one", "S//l1->z")]
    queries.append(("one2", "S//f2->z"))
    stream = [make_document() for _ in range(12)]
    times = sorted(rng.choice([0.0, 0.5, 1.0, 1.5, 2.0, 3.0]) for _ in stream)
    texts = [xml.replace(">", f' ts="{t}">', 1) for xml, t in zip(stream, times, strict=True)]
    (tmp_path / "a.xml").write_text("\n".join(texts[:7]) + "\n")  # several documents a file
    (tmp_path / "b.xml").write_text("\n".join(texts[7:]) + "\n")
    sequential = SequentialEngine()
    for qid, text in queries:
        sequential.add(qid, text)
    docs = [("S", parse_document(xml), t) for xml, t in zip(texts, times, strict=True)]
    want = Counter((r.query, tuple(r.docs), r.output) for r in sequential.run(docs))
    units = read_units(spark, str(tmp_path))
    rows = xscl_units(spark, [("S", units)], queries, timestamp="@ts").collect()
    assert not [r.error for r in rows if r.error]
    assert Counter((r.query, tuple(r.docs), r.output) for r in rows) == want
    assert any(len(docs) == 2 for _, docs, _ in want)  # joins, not only one-block queries


def _xscl_case(directory, seed: int, files: int):
    """Random XSCL queries, documents in ``files`` files (arrival order = name order), and
    the Sequential reference's results."""
    from test_xscl import two_level
    from xcep.testing.xscl_sequential import SequentialEngine
    from xcep.xscl import parse_document

    rng = random.Random(seed)
    make_query, make_document = two_level(rng)
    queries = [(f"q{i}", make_query(i)) for i in range(8)] + [("one", "S//f2->z")]
    texts = [make_document() for _ in range(2 * files)]
    times = sorted(rng.choice([0.0, 1.0, 2.0, 3.0, 4.0, 5.0]) for _ in texts)
    texts = [xml.replace(">", f' ts="{t}">', 1) for xml, t in zip(texts, times, strict=True)]
    os.makedirs(directory, exist_ok=True)
    for f in range(files):
        path = os.path.join(directory, f"{f:03}.xml")
        with open(path, "w") as out:
            out.write("\n".join(texts[2 * f : 2 * f + 2]) + "\n")
        os.utime(path, (1_000_000 + f, 1_000_000 + f))
    sequential = SequentialEngine()
    for qid, text in queries:
        sequential.add(qid, text)
    docs = [("S", parse_document(xml), t) for xml, t in zip(texts, times, strict=True)]
    want = Counter((r.query, tuple(r.docs), r.output) for r in sequential.run(docs))
    assert any(len(d) == 2 for _, d, _ in want)
    return queries, want


def _xscl_output(spark, out) -> Counter:
    rows = spark.read.json(str(out)).collect()
    assert not [r.error for r in rows if "error" in r and r.error]
    return Counter((r.query, tuple(r.docs), r.output) for r in rows)


def test_xscl_streaming_keeps_join_state_across_micro_batches(spark, tmp_path):
    from xcep.spark.xscl import run_stream

    queries, want = _xscl_case(tmp_path / "in", seed=8, files=6)
    units = read_units(spark, str(tmp_path / "in"), stream=True, max_files_per_trigger=2)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    run_stream(spark, [("S", units)], queries, str(out), str(checkpoint), timestamp="@ts")
    assert len([c for c in os.listdir(checkpoint / "commits") if c.isdigit()]) == 3
    assert _xscl_output(spark, out) == want
    # windows of 1 or 2 time units: the oldest batches were evicted from the join state
    kept = [n for n in os.listdir(checkpoint / "xscl-state") if n.startswith("batch=")]
    assert len(kept) < 3 or "inf" in str(queries)


def test_a_killed_xscl_stream_restarts_without_loss_or_duplicates(spark, tmp_path):
    import subprocess
    import sys

    queries, want = _xscl_case(tmp_path / "in", seed=9, files=4)
    (tmp_path / "q.txt").write_text("".join(f"{q}\t{t}\n" for q, t in queries))
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    command = [
        sys.executable, "-m", "xcep", "spark", "xscl", "--queries", str(tmp_path / "q.txt"),
        "--timestamp", "@ts", str(tmp_path / "in"), "--output", str(out),
        "--stream", "--checkpoint", str(checkpoint), "--max-files-per-trigger", "1",
        "--master", "local[1]", "--conf", "spark.sql.shuffle.partitions=1",
    ]  # fmt: skip
    assert 1 <= _kill_after_commits(command, checkpoint, 1) < 4
    second = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert second.returncode == 0, second.stderr[-2000:]
    assert _xscl_output(spark, out) == want


def test_xquery_streaming_answers_each_partition_when_it_ends(spark, tmp_path):
    from xcep import xquery

    query = (Path(__file__).parents[1] / "examples" / "search-no-buy.xq").read_text()
    inputs = tmp_path / "in"
    inputs.mkdir()
    for f in range(4):
        _shop_log(inputs / f"{f:03}.xml", 60, seed=20 + f)
        os.utime(inputs / f"{f:03}.xml", (1_000_000 + f, 1_000_000 + f))
    logs = [str(inputs / f"{f:03}.xml") for f in range(4)]
    # one document with every log's events in order: what the partitions together see
    events = "".join(Path(p).read_text()[len("<log>") : -len("</log>")] for p in logs)
    want = Counter(xquery.compile(query).run(f"<log>{events}</log>"))
    # a later event (of a partition of its own): the watermark passes every other timer
    (inputs / "999.xml").write_text('<log><event operation="Login" uid="late" time="0"/></log>')
    os.utime(inputs / "999.xml", (1_002_000, 1_002_000))
    units = read_units(spark, str(inputs), stream=True, max_files_per_trigger=2)
    items = xquery_units(units, query, "/log/event", "@uid", idle_timeout_ms=100_000)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    write(items, str(out), "json", checkpoint=str(checkpoint))
    got = Counter(r.item for r in read_output(spark, str(out)).collect() if "item" in r and r.item)
    assert got == want and sum(want.values()) > 0


def test_filtering_a_stream_into_parquet(spark, tmp_path, xmark_messages):
    filters = {1: "/person[profile/@income > 50000]", 2: "//interest", 3: "/item[payment]"}
    docs = random.Random(4).sample(xmark_messages, 12)
    inputs = tmp_path / "in"
    inputs.mkdir()
    for i, doc in enumerate(docs):
        (inputs / f"{i:03}.xml").write_bytes(doc)
    units = read_units(spark, str(inputs), stream=True, max_files_per_trigger=5)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    write(filter_units(units, filters), str(out), "parquet", checkpoint=str(checkpoint))
    got = {r.doc_id: r.matches for r in read_output(spark, str(out), "parquet").collect()}
    want = {_uri(inputs / f"{i:03}.xml"): _lxml_matches(d, filters) for i, d in enumerate(docs)}
    assert got == want and any(want.values())


def test_the_jobs_run_on_a_spark_connect_session(tmp_path, xmark_messages):
    """The same filter and XSeq jobs through Spark Connect (a local Connect server, in a
    process of its own: this one holds the classic session)."""
    import subprocess
    import sys

    docs = random.Random(6).sample(xmark_messages, 6)
    (tmp_path / "messages").mkdir()
    for i, doc in enumerate(docs):
        (tmp_path / "messages" / f"{i}.xml").write_bytes(doc)
    paths = _stock_files(tmp_path / "stocks", 2, 30, seed=3)
    filters = {1: "/person[profile/@income > 50000]", 2: "//interest", 3: "/item[payment]"}
    script = f"""
import json
from xcep.spark import filter_units, read_units, session, xseq_units
spark = session(remote="local[2]")
assert type(spark).__module__.startswith("pyspark.sql.connect")
matches = filter_units(read_units(spark, {str(tmp_path / "messages")!r}), {filters!r}).collect()
print(json.dumps({{r.doc_id: r.matches for r in matches}}))
rows = xseq_units(read_units(spark, {str(tmp_path / "stocks")!r}), {FALLING!r}).collect()
print(json.dumps([r.row.toJson() for r in rows]))
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    first, second = done.stdout.strip().splitlines()[-2:]
    messages = tmp_path / "messages"
    want = {_uri(messages / f"{i}.xml"): _lxml_matches(d, filters) for i, d in enumerate(docs)}
    assert json.loads(first) == want
    got = Counter(json.dumps(json.loads(t), sort_keys=True) for t in json.loads(second))
    assert got == _in_process(FALLING, "all", paths)


def test_cli_writes_json_lines_and_refuses_an_existing_output(spark, tmp_path, capsys):
    import io

    from xcep.cli import main

    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.xml").write_text("<order rush='yes'><item>3</item></order>")
    (tmp_path / "in" / "b.xml").write_text("<order><item>1</item></order>")
    (tmp_path / "filters.txt").write_text("1 /order[@rush]\n2 //item[. > 2]\n3 /order[\n")
    out = io.StringIO()
    args = ["spark", "filter", "--filters", str(tmp_path / "filters.txt")]
    args += ["--input", str(tmp_path / "in")]
    assert main(args, stdout=out) == 1  # filter 3 is bad: reported, the others run
    rows = sorted(json.loads(line)["matches"] for line in out.getvalue().splitlines())
    assert rows == [[], [1, 2]]
    assert "line 3, filter 3" in capsys.readouterr().err
    (tmp_path / "out").mkdir()
    assert main([*args, "--output", str(tmp_path / "out")], stdout=io.StringIO()) == 1
    assert "already exists (--overwrite replaces it)" in capsys.readouterr().err
    assert main([*args, "--output", str(tmp_path / "out"), "--overwrite"]) == 1
    written = spark.read.json(str(tmp_path / "out")).collect()
    assert sorted(r.matches for r in written) == [[], [1, 2]]


def _run_rows(kind: str, query, value) -> tuple:
    """One answer as a comparable tuple (filters: the ids, each other kind its value)."""
    return (kind, query, json.dumps(value, sort_keys=True))


@pytest.mark.parametrize("seed", [3, 4])
def test_spark_run_equals_xcep_run_on_each_file(spark, tmp_path, seed):
    """``xcep spark run`` gives, per input file, what ``xcep run`` gives on that file:
    every kind of query over one parse (a file is a stream of its own)."""
    import io

    from xcep.cli import main
    from xcep.plans import read_query_file
    from xcep.spark.run import run_units

    rng = random.Random(seed)
    data = tmp_path / "data"
    data.mkdir()
    for f in range(3):
        docs = [
            f'<t id="{f}-{i}" price="{rng.randint(1, 99)}"><c>{rng.choice("AB")}</c>'
            f"<note>n{rng.randint(0, 3)}</note></t>"
            for i in range(rng.randint(1, 8))
        ]
        (data / f"s{f}.xml").write_text("\n".join(docs) + "\n")
    (data / "bad.xml").write_text("<t><c>A</t>")
    files = {
        "filter": "f1\t/t[c = 'A']\nf2\t//note[contains(., '1')]\nf3\t/t[@price > 50]\n",
        "xseq": "q1\t/t[c='A']/@price\nq2\t//note/text()\n",
        "xquery": "x1\tfor $t in $input/t where $t/@price > 50 return string($t/@id)\n",
        "xscl": "j1\tS//t->x[//c->a] FOLLOWED BY{a=b, 3} S//t->y[//c->b]\n",
    }
    paths = {}
    for kind, text in files.items():
        paths[kind] = tmp_path / f"{kind}.txt"
        paths[kind].write_text(text)

    want: Counter = Counter()
    for f in range(3):
        out = io.StringIO()
        argv = ["run", *(f"--{k if k != 'filter' else 'filters'}={p}" for k, p in paths.items())]
        assert main([*argv, str(data / f"s{f}.xml")], stdout=out) == 0
        for line in out.getvalue().splitlines():
            row = json.loads(line)
            kind = row.pop("kind")
            if kind == "filter":
                want[(f"s{f}", *_run_rows(kind, None, row["matches"]))] += 1
            else:
                query = row.pop("query")
                value = row if kind == "xscl" else row["row" if kind == "xseq" else "item"]
                want[(f"s{f}", *_run_rows(kind, query, value))] += 1

    queries = {kind: read_query_file(str(path)) for kind, path in paths.items()}
    got: Counter = Counter()
    errors = []
    for row in run_units(read_units(spark, str(data)), queries).collect():
        if row.error is not None:
            errors.append(row.doc_id)
            continue
        name = Path(row.doc_id.split("#")[0]).stem if row.doc_id else None
        value = json.loads(row.value.toJson())
        if row.kind == "xscl":
            value.pop("query")
        if row.kind == "filter":
            got[(name, *_run_rows("filter", None, value))] += 1
        else:  # (xcep run does not name the file: the test knows it from the query's rows)
            got[(None, *_run_rows(row.kind, row.query, value))] += 1
    # rows other than filters carry no document: compare them without the file
    strip = Counter()
    for (name, kind, query, value), n in want.items():
        strip[(name if kind == "filter" else None, kind, query, value)] += n
    assert got == strip
    assert [Path(e).name for e in errors] == ["bad.xml"]
