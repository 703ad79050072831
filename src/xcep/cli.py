"""The ``xcep`` command line. Output is JSON Lines (or text) on stdout; errors are
one line each on stderr, with a traceback only under ``--debug``.

Exit status: 0 when everything was read, 1 when some input was bad (reported
and skipped, or, with ``--errors fail``, stopped at), 2 for a bad command line.
"""

from __future__ import annotations

import argparse
import gc
import json
import json.encoder
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from xcep import __version__
from xcep._gc import collector_paused
from xcep.cliargs import (
    EXIT_INPUT,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    Deprecated,
    load_xscl_queries,
    query_text,
    stream_inputs,
)
from xcep.errors import InputError, XcepError, located
from xcep.events import FORMATS, NO_NAME, EventBatch, EventStream, Kind, expand_inputs


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
    from xcep.schema import read_dtd
    from xcep.xpush import MachineOptions, Workload, XPushMachine

    _stats_format(args)
    if args.order and not args.dtd:
        raise ValueError("--order needs --dtd FILE (the order of elements comes from a DTD)")
    # the compiled filters (millions of objects) live as long as the run: built with the
    # collector paused, then frozen out of its way (else it scans them all once or twice)
    with collector_paused():
        workload, errors = Workload.from_file(args.filters, strict=args.strict)
        for error in errors:
            print(f"xcep: error: {args.filters}, {error}", file=stderr)
        dtd = read_dtd(args.dtd) if args.dtd else None
        options = MachineOptions(
            top_down=args.top_down, order=args.order, early=args.early, max_entries=args.max_entries
        )
        machine = XPushMachine(workload, options, order_facts=dtd if args.order else None)
        if args.train:
            machine.train(dtd)
        gc.freeze()

    def consume(stream: EventStream) -> None:  # a document can match thousands of filters
        for doc, matches in machine.run(stream.batches(), as_json=True):
            stdout.write(f'{{"doc":{doc},"matches":{matches}}}\n')
        if args.stats:
            stats = machine.stats_dict()
            stats["mb_per_s"] = stream.stats.to_dict()["mb_per_s"]
            _report_stats(stats, args.stats, stderr)

    status = _read_inputs(args, stdout, stderr, consume, keep_whitespace=True)
    return EXIT_INPUT if errors else status


def cmd_xseq(args, stdout: TextIO, stderr: TextIO) -> int:
    from xcep.xseq import QuerySyntaxError, XSeqEngine, XSeqMultiEngine

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
    invalid = 0
    if args.queries is not None:
        engine = XSeqMultiEngine(**options)
        invalid = _subscribe_queries(engine, args.queries, args.strict, stderr)
        if invalid is None:
            return EXIT_USAGE
    else:
        try:
            engine = XSeqEngine(query_text(args.query), fast=not args.automaton, **options)
        except QuerySyntaxError as error:
            print(f"xcep: error: {error}", file=stderr)
            return EXIT_USAGE
        if args.dtd:
            _warn_undeclared(engine.analysis, schema, args.dtd, stderr)
    if args.explain:
        if isinstance(engine, XSeqMultiEngine):
            stdout.write(json.dumps(engine.stats(), indent=2) + "\n")
        elif args.explain == "dot":
            stdout.write(engine.vpa.dot() + "\n")
        else:
            stdout.write(engine.explain() + "\n")
        return EXIT_OK
    rows = _RowWriter(stdout)

    def consume(stream: EventStream) -> None:
        add = rows.add
        for row in engine.run(stream.batches()):
            add(row)
        rows.write()
        if args.stats:
            stats = engine.stats()
            stats["mb_per_s"] = stream.stats.to_dict()["mb_per_s"]
            _report_stats(stats, args.stats, stderr)

    status = _read_inputs(args, stdout, stderr, consume, on_wait=rows.flush)
    return EXIT_INPUT if invalid else status


class _RowWriter:
    """Rows as JSON Lines, written a chunk at a time (one write per ``CHUNK`` rows), and
    every pending one before the stream waits on a live input (``flush``)."""

    CHUNK = 512

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.lines: list[str] = []
        self.dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode

    def add(self, row: list) -> None:
        lines = self.lines
        lines.append(self.dumps(row))
        if len(lines) >= self.CHUNK:
            self.write()

    def write(self) -> None:
        _write_lines(self.out, self.lines)
        self.lines.clear()

    def flush(self) -> None:
        self.write()
        self.out.flush()


def _subscribe_queries(engine, path: str, strict: bool, stderr: TextIO) -> int | None:
    """Subscribe the ``ID QUERY`` lines of ``path``; the number of invalid ones, reported on
    stderr (None: stop, the file is unreadable or ``strict`` and one is invalid)."""
    from xcep.xpush.workload import read_filters_file
    from xcep.xseq import QuerySyntaxError

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
    for item in lines:
        try:
            engine.subscribe(item.fid, item.text)
        except (QuerySyntaxError, ValueError) as error:
            messages.append((item.line, f"{path}, line {item.line}, query {item.fid}: {error}"))
    for _, message in sorted(messages):
        print(f"xcep: error: {message}", file=stderr)
    invalid = len(messages)
    if invalid and strict:
        return None
    if not engine.queries:
        print(f"xcep: error: --queries {path}: no valid query", file=stderr)
        return None
    return invalid


def cmd_xquery(args, stdout: TextIO, stderr: TextIO) -> int:
    from elementpath.datatypes import UntypedAtomic

    from xcep import xquery

    def failed(error: xquery.XQueryError, compiling: bool = False) -> int:
        """The documented exit codes: 2 for a static error (any error compiling, and
        XPST/XQST codes found running), 1 for a dynamic one."""
        print(f"xcep: error: {error}", file=stderr)
        return EXIT_USAGE if compiling or error.static else EXIT_INPUT

    try:
        query = xquery.compile(query_text(args.query))
    except xquery.XQueryError as error:
        return failed(error, compiling=error.static or error.code is None)
    if args.explain:
        stdout.write(query.explain() + "\n")
        return EXIT_OK

    variables = {}
    for binding in args.var:
        name, sep, value = binding.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"--var takes NAME=VALUE, not {binding!r}")
        variables[name.strip().removeprefix("$")] = UntypedAtomic(value)

    def write(source) -> None:
        for line in query.run(source, variables):
            stdout.write(line + "\n")

    try:
        if args.no_input:
            write(None)
            return EXIT_OK

        def consume(stream: EventStream) -> None:
            write(stream)  # item by item when the query streams (--explain says), else whole

        return _read_inputs(args, stdout, stderr, consume)
    except xquery.XQueryError as error:
        return failed(error)


def cmd_xscl(args, stdout: TextIO, stderr: TextIO) -> int:
    import copy

    from xcep.xscl import (
        TimestampError,
        XsclEngine,
        timestamp_reader,
    )
    from xcep.xscl.documents import documents_from_batches

    adaptive = args.batch == "auto"
    batch_size = AUTO_BATCH if adaptive else args.batch
    if args.view_budget < 0 or batch_size < 1 or args.state_budget < 1:
        stderr.write(
            "xcep: error: --batch and --state-budget must be at least 1, --view-budget at least 0\n"
        )
        return EXIT_USAGE
    if args.view != "full" and args.join != "sql":
        stderr.write(f"xcep: error: --view {args.view} is a way to run --join sql\n")
        return EXIT_USAGE
    engine = XsclEngine(
        batch_size=batch_size,
        view=args.view,
        view_budget=args.view_budget,
        join=args.join,
        state_budget=args.state_budget,
    )
    _, errors = load_xscl_queries(args.queries, engine, stderr)
    if errors and args.strict:
        return EXIT_USAGE
    # the compiled queries live as long as the run: out of the collector's way, its full
    # collections no longer walk them (they cost more than the join at 10,000 queries)
    gc.freeze()
    timestamp = timestamp_reader(args.timestamp)
    seen = [0]  # documents read so far, over all inputs
    bad = [0]

    def documents(stream_name: str, stream: EventStream):
        for doc in documents_from_batches(stream.batches()):
            position = seen[0]
            seen[0] += 1
            try:
                ts = timestamp(doc, position)
            except TimestampError as error:
                print(f"xcep: error: {stream_name} document {position}: {error}", file=stderr)
                bad[0] += 1
                continue
            yield stream_name, doc, ts

    def write(results: list) -> None:
        """A batch's lines in one write, as soon as the batch is joined."""
        if results:
            stdout.write("".join([result.to_json() + "\n" for result in results]))

    status = EXIT_OK
    for name, path in stream_inputs(args.inputs or ["-"], args.stream_name):
        one = copy.copy(args)
        one.inputs = [path]

        def consume(stream: EventStream, name=name) -> None:
            for batch in engine.batches(documents(name, stream), adaptive):
                write(engine.process(batch, args.group))

        status = max(status, _read_inputs(one, stdout, stderr, consume))
    if errors or bad[0]:
        status = max(status, EXIT_INPUT)
    return status


def cmd_run(args, stdout: TextIO, stderr: TextIO) -> int:
    """Every query of every kind over one parse of the inputs (the loop of xcep serve)."""
    from xcep.serve.service import read_query_file, standing_plans

    files = {"filter": args.filters, "xseq": args.xseq, "xquery": args.xquery, "xscl": args.xscl}
    if not any(files.values()):
        print("xcep: error: give queries: --filters, --xseq, --xquery or --xscl FILE", file=stderr)
        return EXIT_USAGE
    runs = [
        (kind, plan.start())
        for kind, path in files.items()
        if path is not None
        for plan in standing_plans(kind, read_query_file(path), per_document=False)
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


AUTO_BATCH = 500  # the largest batch of --batch auto


class _Version(argparse.Action):
    """``--version``: the version, and which compiled kernels are in use (and why not)."""

    def __init__(self, option_strings, dest, **kwargs) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        from xcep.kernels import describe

        sys.stdout.write(f"xcep {__version__}\n{describe()}\n")
        parser.exit()


COUNT_MOST = 2**31 - 1  # the largest count option: a depth, a budget, a size


def _count(text: str, least: int = 1) -> int:
    """A count option (a budget, a depth, a size): a whole number of at least ``least``
    and at most ``COUNT_MOST``."""
    try:
        value = int(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, not {text!r}") from None
    if value < least:
        raise argparse.ArgumentTypeError(f"expected a number of at least {least}, not {value}")
    if value > COUNT_MOST:
        raise argparse.ArgumentTypeError(
            f"expected a number of at most {COUNT_MOST:,}, not {value:,}"
        )
    return value


def _rows(text: str) -> int:
    """``--view-budget``: rows, 0 included (no slice is kept between batches)."""
    return _count(text, least=0)


def _batch_size(text: str) -> int | str:
    """``--batch``: a number, or ``auto``."""
    if text == "auto":
        return text
    try:
        return _count(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"expected a number or 'auto', not {text!r}") from None


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


STATS_FORMATS = ("text", "json")
_STAT_NAMES = {"mb_per_s": "MB/s", "events_per_s": "events/s"}


def _stats_argument(command: argparse.ArgumentParser, help_text: str) -> None:
    """``--stats`` (a text table) or ``--stats=json`` (one JSON line), the same in every
    command. A value that is not a format was a positional argument: ``_stats_format``
    puts it back."""
    command.add_argument(
        "--stats", nargs="?", const="text", default=None, metavar="text|json", help=help_text
    )


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


def _input_arguments(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "inputs", nargs="*", metavar="INPUT", help="files, directories, - for stdin (default)"
    )
    command.add_argument(
        "--input-format",
        choices=FORMATS,
        default="auto",
        help="how to read the inputs (default auto: by file name, then by the first byte)",
    )
    command.add_argument(
        "--errors",
        default="report",
        metavar="report|skip|fail|deadletter:PATH",
        help="what to do with a malformed document (default: report it on stderr, go on, "
        "exit 1 at the end)",
    )
    command.add_argument(
        "--max-depth",
        type=_count,
        default=10_000,
        metavar="N",
        help="the deepest nesting a document may have; deeper ones are malformed (10,000)",
    )
    command.add_argument(
        "--max-attributes",
        type=_count,
        default=10_000,
        metavar="N",
        help="the most attributes one element may have; a document with more is malformed (10,000)",
    )
    command.add_argument(
        "--record-path",
        metavar="PATH",
        help="read the elements at this absolute path of each document as documents of "
        "their own, e.g. /site/people/person (pub/sub over one large document)",
    )
    command.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress bar on stderr (default: when stderr is a terminal)",
    )


def _query_arguments(command: argparse.ArgumentParser) -> None:
    """QUERY (text or @FILE) followed by the input arguments."""
    command.add_argument("query", metavar="QUERY", help="the query text, or @FILE")
    _input_arguments(command)


EXAMPLES = {  # shown by each command's --help; tests/test_cli_docs.py runs every one
    "events": [
        "xcep events examples/shop-events.xml",
        "xcep events --stats examples/xscl/stream.xml",
        "xcep events --record-path /log/event --output-format text examples/shop-events.xml",
    ],
    "filter": [
        "xcep filter --filters examples/person-subscriptions.txt examples/shop-events.xml",
        "xcep filter --stats=json --filters examples/xmark-subscriptions.txt "
        "examples/shop-events.xml",
    ],
    "xseq": [
        "xcep xseq '/log/event[@operation = \"Search\"]/@uid' examples/shop-events.xml",
        "xcep xseq 'return $E@uid, count($E) from /log/$E where $E@operation = \"Login\"' "
        "examples/shop-events.xml",
        "xcep xseq --explain @examples/xmark-falling-prices.xseq",
    ],
    "xquery": [
        "xcep xquery @examples/search-no-buy.xq examples/shop-events.xml",
        "xcep xquery -n 'for $i in 1 to 3 return $i * 2'",
    ],
    "xscl": [
        "xcep xscl --queries examples/xscl/queries.txt --timestamp @date examples/xscl/stream.xml",
    ],
}


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, but the examples keep their lines."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text.startswith("examples"):
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)


def _examples(command: str) -> str:
    return "examples (from the repository's root):\n" + "\n".join(
        f"  {line}" for line in EXAMPLES[command]
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="xcep",
        description="Complex event processing and publish/subscribe over XML and JSON streams.",
    )
    parser.add_argument(
        "--version", action=_Version, help="the version and the compiled kernels in use"
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    events = commands.add_parser(
        "events",
        epilog=_examples("events"),
        formatter_class=_HelpFormatter,
        help="print the nested-word event stream of XML/JSON inputs",
        description="Print the event stream (open/attr/text/close) of the inputs, or counts.",
    )
    _input_arguments(events)
    events.add_argument(
        "--output-format",
        choices=("jsonl", "text"),
        help="jsonl (default for events) or text (default for --stats)",
    )
    events.add_argument("--format", dest="output_format", action=Deprecated, new="--output-format")
    _stats_argument(events, "print counts and speed only, a table (json: one JSON line)")
    events.add_argument(
        "--keep-whitespace",
        action="store_true",
        help="keep text events that are only white space (dropped by default)",
    )
    events.set_defaults(run=cmd_events)

    filters = commands.add_parser(
        "filter",
        epilog=_examples("filter"),
        formatter_class=_HelpFormatter,
        help="which of many XPath filters match each document (XPush)",
        description="For every document, the ids of the filters that match it: one JSON "
        'object per document, {"doc": N, "matches": [ids]}. See docs/xpush.md.',
    )
    _input_arguments(filters)
    filters.add_argument(
        "--filters", required=True, metavar="FILE", help="one 'ID XPATH' per line, # comments"
    )
    _stats_argument(filters, "machine statistics on stderr at the end, a table (json: one line)")
    filters.add_argument("--strict", action="store_true", help="fail on the first bad filter")
    filters.add_argument(
        "--top-down",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="top-down pruning (default: on)",
    )
    filters.add_argument("--order", action="store_true", help="order optimization (needs --dtd)")
    filters.add_argument("--early", action="store_true", help="early notification")
    filters.add_argument(
        "--train",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="warm the machine on training documents made from the filters (and --dtd) "
        "before the first document (default: off here, where a run is short; on in xcep "
        "spark, where workers live long)",
    )
    filters.add_argument("--dtd", metavar="FILE", help="DTD for --order and --train")
    filters.add_argument(
        "--max-entries",
        type=_count,
        default=10_000_000,
        metavar="N",
        help="memory budget: table entries kept before the cache is flushed",
    )
    filters.set_defaults(run=cmd_filter)

    xseq = commands.add_parser(
        "xseq",
        epilog=_examples("xseq"),
        formatter_class=_HelpFormatter,
        help="run an XSeq query (XPath with Kleene-* and sequence patterns)",
        description="Evaluate an XSeq query in one pass: one JSON array per result row. "
        "See docs/xseq.md.",
    )
    xseq.add_argument(
        "query",
        metavar="QUERY",
        nargs="?",
        help="the query text, or @FILE (none with --queries)",
    )
    _input_arguments(xseq)
    xseq.add_argument(
        "--queries",
        metavar="FILE",
        help="run many queries in one automaton: one 'ID QUERY' per line (# comments); each "
        "row is the query's row with its id first",
    )
    xseq.add_argument(
        "--strict",
        action="store_true",
        help="with --queries: stop when a query is invalid (default: report it, run the others)",
    )
    _stats_argument(
        xseq, "the runtime's statistics on stderr at the end, a table (json: one JSON line)"
    )
    xseq.add_argument(
        "--selection",
        choices=("all", "maximal", "skip-past-last"),
        default="all",
        help="which Kleene-* matches to report (default: all)",
    )
    xseq.add_argument(
        "--values", action="store_true", help="print elements as string values, not XML"
    )
    xseq.add_argument(
        "--explain",
        nargs="?",
        const="text",
        metavar="text|dot",
        help="print the parsed query and the automaton (or Graphviz DOT) and stop; with "
        "--queries: queries, templates and states",
    )
    xseq.add_argument(
        "--dtd",
        metavar="FILE",
        help="DTD of the input: warns on undeclared names and enables --opt",
    )
    xseq.add_argument(
        "--learn-schema",
        type=_count,
        metavar="N",
        help="learn the schema facts from the first N documents of the inputs (files) "
        "instead of a DTD: the rewrites then assume the rest is like them",
    )
    xseq.add_argument(
        "--opt",
        choices=("none", "prefix", "loops", "where", "all"),
        default="all",
        help="query rewrites (docs/xseq.md, Optimizer): prefix = spell out the ancestor chain of "
        "a leading //name; loops = unroll a //name whose depth the schema fixes; where = move "
        "tag() tests and conditions on one variable's own subtree from the where clause into "
        "its step; all (default). "
        "prefix and loops need --dtd or --learn-schema",
    )
    xseq.add_argument(
        "--automaton",
        action="store_true",
        help="always run the pushdown automaton, also for a query the path runtime or the "
        "flat-sequence runtime serves (--explain says which runs it; docs/xseq.md)",
    )
    xseq.set_defaults(run=cmd_xseq)

    xq = commands.add_parser(
        "xquery",
        epilog=_examples("xquery"),
        formatter_class=_HelpFormatter,
        help="run an XQuery FLWOR with window and pattern clauses",
        description="Evaluate an XQuery (FLWOR, window clause, pattern clause; XPath 3.1 by "
        "elementpath) over the input documents: one serialized item per line. One document is "
        "the context item and $input; several are $input, in stream order. See docs/xquery.md.",
    )
    _query_arguments(xq)
    xq.add_argument(
        "-n", "--no-input", action="store_true", help="read no input: no context item, no $input"
    )
    xq.add_argument(
        "--explain", action="store_true", help="print the parsed clauses and pattern NFAs and stop"
    )
    xq.add_argument(
        "--var",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="bind an external variable (declare variable $NAME external;) to VALUE, an "
        "untyped atomic value; repeatable",
    )
    xq.set_defaults(run=cmd_xquery)

    xscl = commands.add_parser(
        "xscl",
        epilog=_examples("xscl"),
        formatter_class=_HelpFormatter,
        help="run many XSCL join queries (MMQJP) over document streams",
        description="Evaluate XSCL inter-document join queries: one JSON object per result, "
        '{"query": id, "docs": [document indexes], "output": "<result>...</result>"}. '
        "An INPUT written NAME=PATH is stream NAME; others are --stream-name. See docs/xscl.md.",
    )
    xscl.add_argument(
        "--queries", required=True, metavar="FILE", help="one ID<TAB>XSCL query per line"
    )
    _input_arguments(xscl)
    xscl.add_argument(
        "--timestamp",
        metavar="XPATH",
        help="where each document's time is (@ts, /item/date, //time): a number or an ISO "
        "date; default: arrival order",
    )
    xscl.add_argument("--stream-name", default="S", help="the stream of inputs without NAME= (S)")
    xscl.add_argument("--stream", dest="stream_name", action=Deprecated, new="--stream-name")
    xscl.add_argument(
        "--join",
        choices=["memory", "sql"],
        default="memory",
        help="how the join runs: in memory, each document's results as it arrives (memory), "
        "or one DuckDB statement per template and --batch (sql)",
    )
    xscl.add_argument(
        "--batch",
        type=_batch_size,
        default=1,
        metavar="N|auto",
        help="documents joined together (1); auto: the documents read so far, up to "
        f"{AUTO_BATCH:,}, so that no result waits for a batch to fill (for --join sql); "
        "results of PUBLISH feed back after each batch",
    )
    xscl.add_argument(
        "--group",
        action="store_true",
        help="one line for the queries that find the same documents and output, "
        '{"queries": [ids], ...}, instead of one line per query',
    )
    xscl.add_argument(
        "--state-budget",
        type=_count,
        default=1_000_000,
        metavar="DOCS",
        help="the most documents the join state holds (1,000,000): windows of 'inf' keep "
        "every document, and a run past this budget stops with an error",
    )
    xscl.add_argument(
        "--view",
        choices=["full", "cache", "none"],
        default="full",
        help="with --join sql, string values of the join state (§5): kept with it (full), a "
        "view cache of slices within --view-budget rows (cache), or joined per query (none)",
    )
    xscl.add_argument(
        "--view-budget",
        type=_rows,
        default=1_000_000,
        metavar="ROWS",
        help="with --view cache, the rows its slices may hold (1,000,000)",
    )
    xscl.add_argument("--strict", action="store_true", help="stop if a query is bad")
    xscl.set_defaults(run=cmd_xscl)

    run = commands.add_parser(
        "run",
        formatter_class=_HelpFormatter,
        help="run queries of every kind over one parse of the inputs",
        description="Every filter, XSeq, XQuery and XSCL query (ID<TAB>QUERY per line in each "
        "file) over one parse of the inputs, as xcep serve does on a broker: one JSON object "
        'per line, tagged with its kind ({"kind": "filter", "doc": N, "matches": [ids]}, '
        '{"kind": "xseq", "query": id, "row": [...]}, {"kind": "xquery", "query": id, '
        '"item": "..."}, {"kind": "xscl", "query": id, ...}). See docs/serve.md.',
    )
    for flag in ("--filters", "--xseq", "--xquery", "--xscl"):
        run.add_argument(flag, metavar="FILE", help=f"ID<TAB>query per line ({flag[2:]})")
    _input_arguments(run)
    run.set_defaults(run=cmd_run)

    from xcep.serve.cli import add_commands as add_serve_commands
    from xcep.spark.cli import add_commands

    add_commands(commands)
    add_serve_commands(commands)
    return parser


def main(argv: list[str] | None = None, stdout: TextIO | None = None) -> int:
    stdout = stdout or sys.stdout
    stderr = sys.stderr
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:  # inputs given after options: argparse leaves them over
        if not hasattr(args, "inputs") or any(e.startswith("-") and e != "-" for e in extra):
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
        args.inputs = [*args.inputs, *extra]
    try:
        return args.run(args, stdout, stderr)
    except argparse.ArgumentTypeError as exc:
        parser.exit(EXIT_USAGE, f"xcep: error: {exc}\n")
    except BrokenPipeError:  # the reader went away (| head): stop quietly
        _silence_stdout()
        return EXIT_OK
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except Exception as exc:
        if _interrupted(exc):  # Ctrl-C inside a library (DuckDB) that made it an error
            return EXIT_INTERRUPTED
        if args.debug:
            traceback.print_exc()
        if isinstance(exc, XcepError | ValueError | OSError):
            print(f"xcep: error: {exc}", file=stderr)
            return EXIT_USAGE if isinstance(exc, ValueError) else EXIT_INPUT
        print(
            f"xcep: internal error: {type(exc).__name__}: {exc} (--debug shows the traceback)",
            file=stderr,
        )
        return EXIT_INPUT
    return EXIT_OK


def _interrupted(exc: BaseException) -> bool:
    """Whether ``exc`` is, or was raised while handling, an interruption (Ctrl-C): DuckDB
    turns one into ``InterruptException``, and the cleanup after it may fail again."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, KeyboardInterrupt) or type(exc).__name__ == "InterruptException":
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def _silence_stdout() -> None:
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


if __name__ == "__main__":
    sys.exit(main())
