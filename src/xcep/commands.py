"""The in-process commands of ``xcep`` (``events``, ``filter``, ``xseq``, ``xquery``, ``xscl``,
``run``): each reads its inputs as events, runs its engine and writes JSON Lines;
``cli.py`` parses the command line and calls them (docs/cli.md)."""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import json.encoder
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from itertools import repeat
from operator import attrgetter
from pathlib import Path
from typing import TextIO

from xcep.cliargs import (
    EXIT_INPUT,
    EXIT_OK,
    EXIT_USAGE,
    load_xscl_queries,
    plan_of_lines,
    query_text,
    standing_queries,
    stream_inputs,
)
from xcep.collector import collector_paused
from xcep.errors import InputError, located
from xcep.events import NO_NAME, EventBatch, EventStream, Kind, expand_inputs
from xcep.plans import compile_plan

STATS_FORMATS = ("text", "json")

# what a command keeps to the end of the process (its workload and machine): ``cli.run``
# ends the process without taking them apart object by object (100,000 structural
# filters: 0.08 s); an in-process ``main`` lets the last command's go as the next begins
kept_to_exit: list = []


class ErrorReporter:
    """Carries out ``--errors``: report (default), skip, fail or deadletter:PATH."""

    def __init__(self, spec: str, stderr: TextIO) -> None:
        self.mode, _, path = spec.partition(":")
        if self.mode not in ("report", "skip", "fail", "deadletter") or (
            (self.mode == "deadletter") != bool(path)
        ):
            raise argparse.ArgumentTypeError(
                f"--errors must be report, skip, fail or deadletter:PATH, not {spec!r}"
            )
        self.stderr = stderr
        self.count = 0
        # appended, one write per record: runs in parallel may share the file
        self.deadletter = open(path, "ab", buffering=0) if path else None  # noqa: SIM115

    @property
    def policy(self) -> str | Callable[[InputError], None]:
        return "fail" if self.mode == "fail" else self

    def __call__(self, error: InputError) -> None:
        self.count += 1
        if self.mode == "report":
            print(f"xcep: error: {error}", file=self.stderr)
        elif self.deadletter is not None:
            record = json.dumps(error.to_dict(), ensure_ascii=False) + "\n"
            self.deadletter.write(record.encode("utf-8", "surrogateescape"))

    def close(self) -> int:
        """The exit status the errors call for."""
        if self.deadletter is not None:
            self.deadletter.close()
            if self.count:
                print(
                    f"xcep: {self.count} malformed document(s) written to {self.deadletter.name}",
                    file=self.stderr,
                )
            return EXIT_OK
        return EXIT_INPUT if self.count and self.mode == "report" else EXIT_OK


def _progress_bar(stream_inputs, stderr: TextIO, enabled: bool | None):
    """A tqdm bar over the input bytes (uncompressed): on a terminal for runs over half a
    second, or forced."""
    if enabled is False or (enabled is None and not stderr.isatty()):
        return None
    from tqdm import tqdm

    sizes = [item.size for item in stream_inputs]
    total = sum(sizes) if sizes and None not in sizes else None
    delay = 0.5 if enabled is None else 0
    return tqdm(total=total, unit="B", unit_scale=True, file=stderr, leave=False, delay=delay)


def _advance(bar, read: int, stream: EventStream) -> None:
    """The bar moves by the bytes read (uncompressed) and shows documents and documents/s."""
    bar.update(read)
    elapsed = bar.format_dict.get("elapsed") or 0
    documents = stream.stats.documents
    rate = f", {documents / elapsed:,.0f} docs/s" if elapsed > 0 else ""
    bar.set_postfix_str(f"{documents:,} docs{rate}", refresh=False)


_KIND_JSON = tuple(f',"kind":"{kind}"' for kind in map(str, Kind))


LARGE = 1 << 20  # a value this long is written in pieces, never copied into a line


def _write_lines(out: TextIO, lines: list[str]) -> None:
    """Lines written at once, but a large one (``LARGE``) on its own: a 200 MB text is not
    copied into a joined string (memory stays within a few times the input)."""
    if lines and max(map(len, lines)) < LARGE:  # (the usual case, decided in C)
        out.write("\n".join(lines) + "\n")
        return
    start = 0
    for at, line in enumerate(lines):
        if len(line) >= LARGE:
            if at > start:
                out.write("\n".join(lines[start:at]) + "\n")
            out.write(line)
            out.write("\n")
            start = at + 1
    if start < len(lines):
        out.write("\n".join(lines[start:] if start else lines) + "\n")


def _events_jsonl(batch: EventBatch, quoted: list[str]) -> list[str]:
    """The lines of ``Event.to_dict`` as JSON, written straight from the columns; names
    are encoded once (``quoted``, by name id, kept between batches)."""
    encode = json.encoder.encode_basestring  # JSON strings, non-ASCII kept
    names = batch.symbols.names
    if len(quoted) < len(names):
        quoted.extend(',"name":' + encode(name) for name in names[len(quoted) :])
    lines = []
    append = lines.append
    for doc, kind, name, value, depth, node in zip(
        batch.docs, batch.kinds, batch.names, batch.values, batch.depths, batch.nodes, strict=True
    ):
        named = "" if name == NO_NAME else quoted[name]
        valued = "" if value is None else ',"value":' + encode(value)
        append(f'{{"doc":{doc}{_KIND_JSON[kind]}{named}{valued},"depth":{depth},"node":{node}}}')
    return lines


def _write_events(batch: EventBatch, fmt: str, out: TextIO, quoted: list[str]) -> None:
    lines = []
    if fmt == "jsonl":
        lines = _events_jsonl(batch, quoted)
    else:
        for event in batch:
            indent = "  " * (event.depth - 1)
            if event.kind is Kind.OPEN:
                body = f"<{event.name}>"
            elif event.kind is Kind.CLOSE:
                body = f"</{event.name}>"
            elif event.kind is Kind.ATTR:
                body = f"@{event.name}={json.dumps(event.value, ensure_ascii=False)}"
            else:
                body = json.dumps(event.value, ensure_ascii=False)
            lines.append(f"{event.doc}\t{indent}{body}")
    _write_lines(out, lines)


def _write_stats(stats: dict, fmt: str, out: TextIO) -> None:
    """``events --stats``: the stream's counts and speed, as a table or one JSON line."""
    if fmt == "jsonl":
        _report_stats(stats, "json", out)
        return
    table = {
        "documents": stats["documents"],
        "malformed documents": stats["bad_documents"],
        "events": stats["events"],
        **{f"{kind} events": stats[f"{kind}_events"] for kind in map(str, Kind)},
        "max event depth": stats["max_depth"],
        "bytes": stats["bytes"],
        "seconds": round(stats["seconds"], 3),
        "MB/s": round(stats["mb_per_s"], 2),
        "events/s": stats["events_per_s"],
    }
    _report_stats(table, "text", out)


def _read_inputs(
    args, stdout: TextIO, stderr: TextIO, consume: Callable, on_wait=None, **source_options
) -> int:
    """Open the inputs as one event stream, hand its batches to ``consume``, apply --errors.
    The output is flushed (``on_wait``, else ``stdout.flush``) whenever a live input (a
    pipe) makes the stream wait."""
    reporter = ErrorReporter(args.errors, stderr)
    inputs = expand_inputs(args.inputs or ["-"], args.input_format)
    bar = _progress_bar(inputs, stderr, args.progress)
    stream = EventStream(
        inputs,
        errors=reporter.policy,
        progress=(lambda read: _advance(bar, read, stream)) if bar is not None else None,
        on_wait=on_wait or stdout.flush,
        record_path=args.record_path,
        max_depth=args.max_depth,
        max_attributes=args.max_attributes,
        keep_raw=reporter.deadletter is not None,
        **source_options,
    )
    try:
        consume(stream)
    except InputError as error:  # --errors fail
        print(f"xcep: error: {error}", file=stderr)
        return EXIT_INPUT
    finally:
        if bar is not None:
            bar.close()
        status = reporter.close()
    return status


def cmd_events(args, stdout: TextIO, stderr: TextIO) -> int:
    _stats_format(args)
    if args.stats == "json":
        args.output_format = args.output_format or "jsonl"
    fmt = args.output_format or ("text" if args.stats else "jsonl")

    quoted: list[str] = []  # the names as JSON, by id

    def consume(stream: EventStream) -> None:
        for batch in stream.batches():
            if not args.stats:
                _write_events(batch, fmt, stdout, quoted)
        if args.stats:
            _write_stats(stream.stats.to_dict(), fmt, stdout)

    return _read_inputs(args, stdout, stderr, consume, keep_whitespace=args.keep_whitespace)


class _Quoted(dict):
    """Values as JSON, each encoded once."""

    encode = staticmethod(json.JSONEncoder(ensure_ascii=False).encode)

    def __missing__(self, value) -> str:
        found = self[value] = self.encode(value)
        return found


def cmd_filter(args, stdout: TextIO, stderr: TextIO) -> int:
    from xcep.xpush import Workload

    _stats_format(args)
    if args.order and not args.dtd:
        raise ValueError("--order needs --dtd FILE (the order of elements comes from a DTD)")
    # the compiled filters (millions of objects) live as long as the run: built with the
    # collector paused, then frozen out of its way (else it scans them all once or twice)
    with collector_paused():
        workload, errors = Workload.from_file(args.filters, strict=args.strict)
        for error in errors:
            print(f"xcep: error: {args.filters}, {error}", file=stderr)
        plan = compile_plan(
            "filter",
            workload,
            dtd=args.dtd,
            train=args.train,
            answers="json",  # a document can match thousands of filters
            top_down=args.top_down,
            counting=args.counting,
            order=args.order,
            early=args.early,
            max_entries=args.max_entries,
        )
        run = plan.start()
        gc.freeze()

    def write(rows: list) -> None:  # an answer can be megabytes: written, not copied
        for _, doc, ids in rows:
            stdout.write(f'{{"doc":{doc},"matches":')
            stdout.write(ids)
            stdout.write("}\n")

    def consume(stream: EventStream) -> None:
        for batch in stream.batches():
            write(run.feed(batch))
        write(run.finish())
        if args.stats:
            stats = run.stats()
            stats["mb_per_s"] = stream.stats.to_dict()["mb_per_s"]
            _report_stats(stats, args.stats, stderr)

    status = _read_inputs(args, stdout, stderr, consume, keep_whitespace=True)
    kept_to_exit.append((workload, plan, run))
    return EXIT_INPUT if errors else status


def cmd_xseq(args, stdout: TextIO, stderr: TextIO) -> int:
    from xcep.xseq import QuerySyntaxError

    _stats_format(args, "query")
    if args.explain not in (None, "text", "dot"):  # `--explain QUERY ...`: not its value
        if args.query is not None:
            args.inputs.insert(0, args.query)
        args.query, args.explain = args.explain, "text"
    if args.queries is not None and args.query is not None:
        args.inputs.insert(0, args.query)  # with --queries every argument is an input
    elif args.queries is None and args.query is None:
        print("xcep: error: give a QUERY, or --queries FILE", file=stderr)
        return EXIT_USAGE
    schema = None
    if args.dtd:
        from xcep.schema import DtdError, read_dtd

        try:
            schema = read_dtd(args.dtd)
        except (OSError, DtdError) as error:
            print(f"xcep: error: --dtd {args.dtd}: {error}", file=stderr)
            return EXIT_USAGE
    if args.learn_schema is not None:
        if args.dtd or args.learn_schema < 1:
            print("xcep: error: --learn-schema takes N ≥ 1 and no --dtd", file=stderr)
            return EXIT_USAGE
        if not args.inputs or "-" in args.inputs:
            print("xcep: error: --learn-schema reads the inputs twice: give files", file=stderr)
            return EXIT_USAGE
        from xcep.schema import learn_schema

        sample = EventStream(args.inputs, format=args.input_format, errors="skip")
        schema = learn_schema(sample.batches(), documents=args.learn_schema)
    if schema is None and args.inputs and args.opt != "none":
        from xcep.schema import internal_subset

        first = Path(args.inputs[0])
        if first.is_file() and first.suffix in (".xml", ".gz"):
            schema = internal_subset(first)  # the document's own <!DOCTYPE r [ … ]>
    options = dict(selection=args.selection, values_only=args.values, schema=schema, opt=args.opt)
    runtime = "automaton" if args.automaton else args.runtime
    invalid = 0
    if args.queries is not None:
        found = _query_plan(args.queries, args.strict, {**options, "runtime": runtime}, stderr)
        if found is None:
            return EXIT_USAGE
        plan, invalid = found
    else:
        try:
            plan = compile_plan("xseq", {None: query_text(args.query)}, runtime=runtime, **options)
        except QuerySyntaxError as error:
            print(f"xcep: error: {error}", file=stderr)
            return EXIT_USAGE
        if args.dtd:
            _warn_undeclared(plan.engine.analysis, schema, args.dtd, stderr)
    if args.explain:
        stdout.write(plan.explain(args.explain) + "\n")
        return EXIT_OK
    rows = _RowWriter(stdout)
    several = args.queries is not None

    def consume(stream: EventStream) -> None:
        add = rows.add_with_ids if several else rows.add_values
        run = plan.start()
        for batch in stream.batches():
            add(run.feed(batch))  # (not kept in a name: freed before the next batch's)
        add(run.finish())
        rows.write()
        if args.stats:
            stats = run.stats()
            stats["mb_per_s"] = stream.stats.to_dict()["mb_per_s"]
            _report_stats(stats, args.stats, stderr)

    status = _read_inputs(args, stdout, stderr, consume, on_wait=rows.flush)
    return EXIT_INPUT if invalid else status


def compact_json() -> Callable[[Iterable], Iterator[str]]:
    """``map(json.dumps, values)`` with ``ensure_ascii=False, separators=(",", ":")``,
    made once: the standard library's C encoder called directly, from C (``map``; a
    ``JSONEncoder.encode`` per value builds an encoder each time: 0.8 µs of a one-string
    row's 1 µs), or the encoder where there is no C one."""
    from json.encoder import c_make_encoder, encode_basestring

    encoder = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
    if c_make_encoder is None:
        return partial(map, encoder.encode)
    make = c_make_encoder(
        None, encoder.default, encode_basestring, None, ":", ",", False, False, True
    )

    def dumps_all(values: Iterable) -> Iterator[str]:
        return map("".join, map(make, values, repeat(0)))

    return dumps_all


def json_lines(compiled: bool = True) -> Callable[..., str]:
    """``lines(values, firsts=None)``: each value — or ``[first, *value]`` with its first
    from ``firsts`` — as ``compact_json`` writes it, one line each, ``\n`` after each, as one
    str. The events kernel writes them (``_tokenizer.json_lines``: strings, numbers,
    booleans, null, lists and tuples, straight into one buffer, no str per row), handing a
    row with anything else to ``compact_json``; without it (or ``compiled=False``),
    ``compact_json`` writes all."""
    dumps_all = compact_json()

    def one(value, first=_NO_FIRST) -> str:
        return next(dumps_all([value if first is _NO_FIRST else [first, *value]]))

    try:
        from xcep.events._tokenizer import json_lines as kernel
    except ImportError:
        kernel = None
    if not compiled:
        kernel = None

    def lines(values: list, firsts: list | None = None) -> str:
        if kernel is not None:
            return kernel(values, firsts, one)
        rows = values if firsts is None else ([f, *v] for f, v in zip(firsts, values, strict=True))
        return "".join([line + "\n" for line in dumps_all(rows)])

    return lines


_NO_FIRST = object()
_VALUE = attrgetter("value")  # a plan's ``Row``'s value
_QUERY = attrgetter("query")


class _RowWriter:
    """Rows as JSON Lines, encoded a chunk at a time (``CHUNK`` rows: in cache) and written
    once ``CHUNK`` rows or more wait, and every pending one before the stream waits on a live
    input (``flush``)."""

    CHUNK = 512

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.texts: list[str] = []
        self.waiting = 0  # rows in texts
        self.lines = json_lines()

    def add_values(self, rows: list) -> None:
        """Each row's value (``Row.value``)."""
        for start in range(0, len(rows), self.CHUNK):
            chunk = rows[start : start + self.CHUNK]
            self._add(self.lines(list(map(_VALUE, chunk))), len(chunk))

    def add_with_ids(self, rows: list) -> None:
        """Each row's query id then its value (a query file's rows)."""
        for start in range(0, len(rows), self.CHUNK):
            chunk = rows[start : start + self.CHUNK]
            self._add(self.lines(list(map(_VALUE, chunk)), list(map(_QUERY, chunk))), len(chunk))

    def _add(self, text: str, rows: int) -> None:
        self.texts.append(text)
        self.waiting += rows
        if self.waiting >= self.CHUNK:
            self.write()

    def write(self) -> None:
        for text in self.texts:  # (each on its own: a large value is not copied again)
            self.out.write(text)
        self.texts.clear()
        self.waiting = 0

    def flush(self) -> None:
        self.write()
        self.out.flush()


def _query_plan(path: str, strict: bool, options: dict, stderr: TextIO):
    """The plan of the ``ID QUERY`` lines of ``path`` and the number of invalid ones,
    reported on stderr (None: stop, the file is unreadable or ``strict`` and one is
    invalid, or none is valid)."""
    from xcep.idlines import read_filters_file

    errors: list = []
    try:
        lines = read_filters_file(path, errors, what="query")
    except OSError as error:
        print(f"xcep: error: --queries {path}: {error.strerror or error}", file=stderr)
        return None
    messages = [
        (
            error.line,
            f"{path}, {located(error.message, ('line', error.line), ('column', error.column))}",
        )
        for error in errors
    ]
    rows = [(item.fid, item.text, item.line) for item in lines]
    plan, bad = plan_of_lines("xseq", rows, **options)
    messages += [
        (line, f"{path}, line {line}, query {qid}: {message}") for line, qid, message in bad
    ]
    for _, message in sorted(messages):
        print(f"xcep: error: {message}", file=stderr)
    invalid = len(messages)
    if invalid and strict:
        return None
    if not plan.queries:
        print(f"xcep: error: --queries {path}: no valid query", file=stderr)
        return None
    return plan, invalid


def cmd_xquery(args, stdout: TextIO, stderr: TextIO) -> int:
    from elementpath.datatypes import UntypedAtomic

    from xcep import xquery

    def failed(error: xquery.XQueryError, compiling: bool = False) -> int:
        """The documented exit codes: 2 for a static error (any error compiling, and
        XPST/XQST codes found running), 1 for a dynamic one."""
        print(f"xcep: error: {error}", file=stderr)
        return EXIT_USAGE if compiling or error.static else EXIT_INPUT

    variables = {}
    for binding in args.var:
        name, sep, value = binding.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"--var takes NAME=VALUE, not {binding!r}")
        variables[name.strip().removeprefix("$")] = UntypedAtomic(value)
    try:
        plan = compile_plan("xquery", {"q": query_text(args.query)}, variables=variables)
    except xquery.XQueryError as error:
        return failed(error, compiling=error.static or error.code is None)
    if args.explain:
        stdout.write(plan.explain() + "\n")
        return EXIT_OK

    def write(rows: list) -> None:
        if rows:
            stdout.write("".join(row.value + "\n" for row in rows))

    def consume(stream: EventStream) -> None:
        """Item by item as windows close when the query streams (--explain says), else
        every document read (the collector paused: trees are all new objects), then
        evaluated."""
        run = plan.start()
        try:
            with contextlib.nullcontext() if plan.streams else collector_paused():
                for batch in stream.batches():
                    write(run.feed(batch))
            write(run.finish())
        finally:
            run.close()

    try:
        if args.no_input:
            run = plan.start()
            write(run.finish())
            return EXIT_OK
        return _read_inputs(args, stdout, stderr, consume, **plan.source_options)
    except xquery.XQueryError as error:
        return failed(error)


def cmd_xscl(args, stdout: TextIO, stderr: TextIO) -> int:
    import copy

    small_batch = args.batch != "auto" and args.batch < 1
    if args.view_budget < 0 or args.state_budget < 1 or small_batch:
        stderr.write(
            "xcep: error: --batch and --state-budget must be at least 1, --view-budget at least 0\n"
        )
        return EXIT_USAGE
    if args.view != "full" and args.join != "sql":
        stderr.write(f"xcep: error: --view {args.view} is a way to run --join sql\n")
        return EXIT_USAGE
    plan, errors = load_xscl_queries(
        args.queries,
        stderr,
        batch=args.batch,
        grouped=args.group,
        timestamp=args.timestamp,
        view=args.view,
        view_budget=args.view_budget,
        join=args.join,
        state_budget=args.state_budget,
    )
    if errors and args.strict:
        return EXIT_USAGE
    run = plan.start()
    # the compiled queries live as long as the run: out of the collector's way, its full
    # collections no longer walk them (they cost more than the join at 10,000 queries)
    gc.freeze()
    bad = 0

    def write(rows: list) -> None:
        """A batch's lines in one write, as soon as the batch is joined; the documents
        without a time reported."""
        nonlocal bad
        if rows:
            stdout.write("".join([row.value + "\n" for row in rows]))
        for error in run.errors:
            print(f"xcep: error: {error}", file=stderr)
        bad += len(run.errors)
        run.errors.clear()

    status = EXIT_OK
    inputs = stream_inputs(args.inputs or ["-"], args.stream_name)
    for number, (name, path) in enumerate(inputs):
        one = copy.copy(args)
        one.inputs = [path]
        last = number == len(inputs) - 1

        def consume(stream: EventStream, name=name, last=last) -> None:
            write(run.begin_stream(name))
            for batch in stream.batches():
                # a few documents at a time, whole join batches (a join can have many
                # results per document: a piece's are written before the next is
                # joined; 8 documents: fewer calls, the results still small)
                for piece in batch.pieces(max(plan.batch_size, 8)):
                    write(run.feed(piece))
            if last:
                write(run.finish())

        status = max(status, _read_inputs(one, stdout, stderr, consume))
    if errors or bad:
        status = max(status, EXIT_INPUT)
    return status


def cmd_run(args, stdout: TextIO, stderr: TextIO) -> int:
    """Every query of every kind over one parse of the inputs (the loop of xcep serve)."""
    from xcep.plans import standing_plans

    queries = standing_queries(args, stderr)
    if queries is None:
        return EXIT_USAGE
    runs = [
        (kind, plan.start())
        for kind, texts in queries.items()
        for plan in standing_plans(kind, texts, per_document=False)
    ]

    def line(kind: str, row) -> str:
        if kind == "filter":
            return json.dumps({"kind": kind, "doc": row.doc, "matches": row.value})
        if kind == "xscl":  # its result's own JSON object, tagged
            return '{"kind":"xscl",' + row.value[1:]
        field = "row" if kind == "xseq" else "item"
        return json.dumps({"kind": kind, "query": row.query, field: row.value}, default=str)

    def consume(stream: EventStream) -> None:
        for batch in stream.batches():
            for kind, run in runs:
                rows = run.feed(batch)
                if rows:
                    stdout.write("".join(line(kind, row) + "\n" for row in rows))
        for kind, run in runs:
            stdout.write("".join(line(kind, row) + "\n" for row in run.finish()))

    return _read_inputs(args, stdout, stderr, consume, keep_whitespace=True)


def _warn_undeclared(analysis, dtd, dtd_path: str, stderr: TextIO) -> None:
    """Name the elements of the query that the DTD does not declare (a likely typo)."""
    from xcep.xseq import ast

    declared = set(dtd.elements)
    for node in ast.walk(analysis.query.path):
        named = isinstance(node, ast.Step) and node.kind == ast.ELEMENT and node.name != "*"
        if named and node.axis != ast.ATTRIBUTE and node.name not in declared:
            print(
                f"xcep: warning: query column {node.pos + 1}: element {node.name!r} is not "
                f"declared in {dtd_path}",
                file=stderr,
            )


_STAT_NAMES = {"mb_per_s": "MB/s", "events_per_s": "events/s"}


def _stats_format(args, positional: str | None = None) -> None:
    """Put back a positional argument that ``--stats`` took as its value (``--stats QUERY``,
    ``--stats FILE``): into ``args.<positional>`` when given and empty, else the inputs."""
    value = args.stats
    if value is None or value in STATS_FORMATS:
        return
    args.stats = "text"
    if positional is not None and getattr(args, positional) is None:
        setattr(args, positional, value)
    elif positional is not None:
        args.inputs.insert(0, getattr(args, positional))
        setattr(args, positional, value)
    else:
        args.inputs.insert(0, value)


def _report_stats(stats: dict, fmt: str, out: TextIO) -> None:
    """Statistics as one JSON line (``json``) or an aligned table, nested keys joined."""
    if fmt == "json":
        out.write(json.dumps(stats) + "\n")
        return
    rows: list[tuple[str, str]] = []

    def flatten(prefix: str, value) -> None:
        if isinstance(value, dict):
            for key, inner in value.items():
                flatten(f"{prefix} {key}".strip(), inner)
        elif isinstance(value, float):
            rows.append((prefix, f"{value:,.4g}"))
        elif isinstance(value, int) and not isinstance(value, bool):
            rows.append((prefix, f"{value:,}"))
        else:
            rows.append((prefix, str(value)))

    flatten("", stats)
    names = [_STAT_NAMES.get(name, name.replace("_", " ")) for name, _ in rows]
    width = max((len(name) for name in names), default=0)
    out.write("".join(f"{n:<{width}}  {v:>12}\n" for n, (_, v) in zip(names, rows, strict=True)))
