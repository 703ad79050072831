"""``xcep spark filter|xseq|xquery|xscl|run``: the engines as Spark jobs, batch or
streaming."""

from __future__ import annotations

import argparse
import time
from typing import TextIO

from xcep.cliargs import (
    EXIT_INPUT,
    EXIT_OK,
    EXIT_USAGE,
    Deprecated,
    add_query_files,
    load_xscl_queries,
    query_text,
    standing_queries,
    stream_inputs,
)


def add_commands(commands) -> None:
    spark = commands.add_parser(
        "spark",
        help="run an engine as a Spark job (batch or streaming)",
        description="Run xcep's engines on Apache Spark: documents become rows, each Python "
        "worker builds the engine once. See docs/spark.md.",
    )
    jobs = spark.add_subparsers(dest="job", metavar="JOB", required=True)

    filters = jobs.add_parser(
        "filter",
        help="XPush filtering: per document, the ids of the matching filters",
        description='Rows {"doc_id": ..., "matches": [ids]} (or "error" for a malformed document).',
    )
    filters.add_argument("--filters", required=True, metavar="FILE", help="one 'ID XPATH' a line")
    filters.add_argument("--strict", action="store_true", help="fail on the first bad filter")
    filters.add_argument(
        "--train",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="warm each worker's machine on training documents (default: on)",
    )
    _job_arguments(filters)
    filters.set_defaults(run=cmd_spark_filter)

    xseq = jobs.add_parser(
        "xseq",
        help="an XSeq query; partition by runs per key in parallel",
        description='Rows {"key": partition, "row": "[...]"} or {"doc_id": ..., "row": ...} '
        "(see docs/spark.md).",
    )
    xseq.add_argument("query", metavar="QUERY", help="the query text, or @FILE")
    xseq.add_argument(
        "--selection",
        choices=("all", "maximal", "skip-past-last"),
        default="all",
        help="which Kleene-* matches to report (default: all)",
    )
    _idle_timeout(xseq)
    _job_arguments(xseq)
    xseq.set_defaults(run=cmd_spark_xseq)

    xq = jobs.add_parser(
        "xquery",
        help="an XQuery per partition of records (--partition-by) or per document",
        description='Rows {"key": partition, "item": "<serialized item>"} or '
        '{"doc_id": ..., "item": ...} (see docs/spark.md).',
    )
    xq.add_argument("query", metavar="QUERY", help="the query text, or @FILE")
    _idle_timeout(xq)
    xq.add_argument(
        "--partition-by",
        metavar="KEY",
        help="run the query once per value of KEY (@attr or an XPath on each record; needs "
        "--record-path): use the key the query groups by",
    )
    _job_arguments(xq)
    xq.set_defaults(run=cmd_spark_xquery)

    xscl = jobs.add_parser(
        "xscl",
        help="many XSCL join queries: Stage 1 on the workers, Stage 2 on Spark SQL",
        description='Rows {"query": id, "docs": [document indexes], "output": "<result>"} '
        "(see docs/spark.md). An INPUT written NAME=PATH is stream NAME.",
    )
    xscl.add_argument(
        "--queries", required=True, metavar="FILE", help="one ID<TAB>XSCL query per line"
    )
    xscl.add_argument("--timestamp", metavar="XPATH", help="where each document's time is")
    xscl.add_argument("--stream-name", default="S", help="the stream of inputs without NAME=")
    xscl.add_argument("--strict", action="store_true", help="stop if a query is bad")
    _job_arguments(xscl)
    xscl.set_defaults(run=cmd_spark_xscl)

    run = jobs.add_parser(
        "run",
        help="standing queries of every kind over one parse per file or record",
        description='Rows {"kind": ..., "query": id, "doc_id": ..., "value": "<JSON>"}: every '
        "filter, XSeq, XQuery and XSCL query (ID<TAB>QUERY per line in each file) over one "
        "parse of each input file (or record), as xcep run over that file (see docs/spark.md).",
    )
    add_query_files(run)
    _job_arguments(run)
    run.set_defaults(run=cmd_spark_run)


def _idle_timeout(job: argparse.ArgumentParser) -> None:
    job.add_argument(
        "--idle-timeout",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="streaming: a partition ends this long (event time) after its last record",
    )
    job.add_argument(
        "--state-ttl",
        type=float,
        metavar="SECONDS",
        help="streaming: drop a partition's state this long (processing time) after its "
        "last record, even if its idle timer has not fired (default: never)",
    )


def _partition_timing(args) -> dict:
    """--idle-timeout and --state-ttl, in the milliseconds the jobs take."""
    ttl = None if args.state_ttl is None else int(args.state_ttl * 1000)
    return {"idle_timeout_ms": int(args.idle_timeout * 1000), "state_ttl_ms": ttl}


def _job_arguments(job: argparse.ArgumentParser) -> None:
    job.add_argument(
        "inputs", nargs="*", metavar="INPUT", help="files or directories (NAME=PATH for xscl)"
    )
    job.add_argument("--input", dest="input", action=Deprecated, new="INPUT arguments", append=True)
    job.add_argument("--output", metavar="PATH", help="output directory (default: console)")
    job.add_argument(
        "--output-format",
        choices=("json", "parquet", "console"),
        help="json (JSON Lines files, the default with --output), parquet, or console",
    )
    job.add_argument("--format", dest="output_format", action=Deprecated, new="--output-format")
    job.add_argument("--overwrite", action="store_true", help="replace an existing output")
    job.add_argument(
        "--record-path",
        metavar="PATH",
        help="cut each file (one large XML document) into records at this path, "
        "e.g. /stocks/transaction",
    )
    job.add_argument("--stream", action="store_true", help="Structured Streaming over INPUT")
    job.add_argument("--checkpoint", metavar="DIR", help="streaming: the checkpoint directory")
    job.add_argument(
        "--trigger",
        default="available-now",
        metavar="available-now|INTERVAL",
        help="streaming: process what is there and stop (default), or e.g. '10 seconds'",
    )
    job.add_argument(
        "--max-files-per-trigger", type=int, metavar="N", help="streaming: files per micro-batch"
    )
    job.add_argument("--master", metavar="URL", help="Spark master (default: local[*])")
    job.add_argument(
        "--remote", metavar="URL", help="a Spark Connect server (sc://host:15002) instead"
    )
    job.add_argument(
        "--conf", action="append", default=[], metavar="KEY=VALUE", help="a Spark setting"
    )
    job.add_argument(
        "--verbose", action="store_true", help="Spark's own logging (default: errors only)"
    )
    job.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress bar on stderr (default: when stderr is a terminal)",
    )


def _session(args):
    from xcep.spark.session import session

    conf = {}
    for item in args.conf:
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"--conf takes KEY=VALUE, not {item!r}")
        conf[key] = value
    return session(args.master, conf=conf, remote=args.remote, quiet=not args.verbose)


def _units(spark, args):
    from xcep.spark.sources import read_units

    if args.stream and len(args.input) != 1:
        raise ValueError("--stream reads one INPUT directory")
    return read_units(
        spark,
        args.input,
        record_path=args.record_path,
        stream=args.stream,
        max_files_per_trigger=args.max_files_per_trigger,
    )


def _spark_errors(command):
    """Spark's own errors as one line on stderr (the Java trace only under --debug)."""

    def run(args, stdout: TextIO, stderr: TextIO) -> int:
        from pyspark.errors import PySparkException

        args.input = [*(args.input or []), *args.inputs]  # INPUT, and the old --input
        if not args.input:
            raise ValueError("give INPUT files or directories")

        try:
            return command(args, stdout, stderr)
        except PySparkException as exc:
            if args.debug:
                raise
            condition = exc.getCondition() if hasattr(exc, "getCondition") else None
            if condition == "PATH_ALREADY_EXISTS":
                message = f"{args.output} already exists (--overwrite replaces it)"
            else:
                message = str(exc).strip().splitlines()[0]
            print(f"xcep: error: spark: {message}", file=stderr)
            return EXIT_INPUT

    return run


def _write(spark, args, df, stdout: TextIO, stderr: TextIO, started: float) -> int:
    from xcep.spark.progress import spark_progress
    from xcep.spark.sinks import write

    fmt = args.output_format or ("json" if args.output else "console")
    with spark_progress(spark, stderr, args.progress if not args.stream else False):
        printed = write(
            df,
            args.output,
            fmt,
            checkpoint=args.checkpoint,
            trigger=args.trigger,
            overwrite=args.overwrite,
            out=stdout,
        )
    where = f"{printed} rows to the console" if fmt == "console" else f"{fmt} in {args.output}"
    print(f"xcep spark: {where} in {time.perf_counter() - started:.1f} s", file=stderr)
    return EXIT_OK


@_spark_errors
def cmd_spark_filter(args, stdout: TextIO, stderr: TextIO) -> int:
    from xcep.spark.filter import filter_units
    from xcep.xpush import Workload

    started = time.perf_counter()
    workload, errors = Workload.from_file(args.filters, strict=args.strict)
    for error in errors:
        print(f"xcep: error: {args.filters}, {error}", file=stderr)
    spark = _session(args)
    df = filter_units(_units(spark, args), workload.texts, train=args.train)
    status = _write(spark, args, df, stdout, stderr, started)
    return EXIT_INPUT if errors else status


@_spark_errors
def cmd_spark_xseq(args, stdout: TextIO, stderr: TextIO) -> int:
    from xcep.spark.xseq import xseq_units
    from xcep.xseq import QuerySyntaxError

    started = time.perf_counter()
    text = query_text(args.query)
    try:
        from xcep.xseq import analyze

        analyze(text)
    except QuerySyntaxError as error:
        print(f"xcep: error: {error}", file=stderr)
        return EXIT_USAGE
    spark = _session(args)
    df = xseq_units(
        _units(spark, args),
        text,
        args.selection,
        record_path=args.record_path,
        **_partition_timing(args),
    )
    return _write(spark, args, df, stdout, stderr, started)


@_spark_errors
def cmd_spark_xquery(args, stdout: TextIO, stderr: TextIO) -> int:
    from xcep import xquery
    from xcep.plans import compile_plan
    from xcep.spark.xquery import xquery_units

    started = time.perf_counter()
    text = query_text(args.query)
    try:
        compile_plan("xquery", {None: text})
    except xquery.XQueryError as error:
        print(f"xcep: error: {error}", file=stderr)
        return EXIT_USAGE
    if args.partition_by and not args.record_path:
        raise ValueError("--partition-by needs --record-path (the events to partition)")
    spark = _session(args)
    df = xquery_units(
        _units(spark, args),
        text,
        args.record_path,
        args.partition_by,
        **_partition_timing(args),
    )
    return _write(spark, args, df, stdout, stderr, started)


@_spark_errors
def cmd_spark_xscl(args, stdout: TextIO, stderr: TextIO) -> int:
    from xcep.spark.sources import read_units
    from xcep.spark.xscl import run_stream, xscl_units

    started = time.perf_counter()
    plan, errors = load_xscl_queries(args.queries, stderr)
    good = list(plan.queries.items())
    if errors and args.strict:
        return EXIT_USAGE
    spark = _session(args)
    named = stream_inputs(args.input, args.stream_name)
    if args.stream:
        if len(named) != 1:
            raise ValueError("--stream reads one INPUT directory")
        if not (args.output or args.output_format == "console") or not args.checkpoint:
            raise ValueError(
                "a streaming xscl job needs --output (or --format console) and --checkpoint"
            )
        name, path = named[0]
        units = read_units(
            spark, path, args.record_path, stream=True,
            max_files_per_trigger=args.max_files_per_trigger,
        )  # fmt: skip
        run_stream(
            spark, [(name, units)], good, args.output, args.checkpoint, args.timestamp,
            args.output_format or "json", args.trigger,
        )  # fmt: skip
        print(f"xcep spark: results in {args.output}/batch=*", file=stderr)
        return EXIT_INPUT if errors else EXIT_OK
    inputs = [(name, read_units(spark, path, args.record_path)) for name, path in named]
    df = xscl_units(spark, inputs, good, args.timestamp)
    status = _write(spark, args, df, stdout, stderr, started)
    return EXIT_INPUT if errors else status


@_spark_errors
def cmd_spark_run(args, stdout: TextIO, stderr: TextIO) -> int:
    from xcep.spark.run import run_units

    started = time.perf_counter()
    queries = standing_queries(args, stderr)
    if queries is None:
        return EXIT_USAGE
    spark = _session(args)
    df = run_units(_units(spark, args), queries)
    return _write(spark, args, df, stdout, stderr, started)
