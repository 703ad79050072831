"""XSCL / MMQJP on Spark: Stage 1 as ``mapInArrow``, Stage 2 as the same SQL on Spark SQL.

1. The driver registers the queries in an ``XsclEngine`` (parse errors, query
   templates, the template relations ``r_t_K`` and each template's SQL text).
2. Stage 1 runs on the workers: each builds the same engine once and turns each
   document into its witness rows (``r_doc``, ``r_bin``, ``r_docts``), the XML
   of the nodes some query outputs, and the results of one-block queries.
   Documents are numbered in stream order (inputs in the order given, then file
   path, then position), as ``xcep xscl`` numbers them in-process.
3. Stage 2 runs each template's conjunctive query — the very SQL text the
   in-process engine gives DuckDB — on Spark SQL over temporary views of those
   relations, with every document of the run as the batch, joined with every
   earlier one within the window.
4. Results are assembled with Spark too: output nodes joined with their XML.

Output rows: ``query``, ``docs`` (document indexes, in the order of the query's
blocks), ``output`` (the result document), as ``xcep xscl`` prints them; a
malformed document or one without a timestamp is a row with ``error``.
Not on Spark yet: queries reading a stream another query publishes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from xcep.spark.units import WorkerCache

if TYPE_CHECKING:
    from collections.abc import Iterator

    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

OUTPUT_SCHEMA = "query string, docs array<bigint>, output string, error string"
STAGE1_SCHEMA = (
    "input int, path string, record long, doc int, doc_id string, ts double, "
    "strings array<struct<node:int, strval:string>>, "
    "bindings array<struct<var1:string, var2:string, node1:int, node2:int, strval:string>>, "
    "xml array<struct<node:int, xml:string>>, "
    "matches array<struct<query:string, node:int>>, error string"
)
_ENGINES = WorkerCache()  # per Python worker process


def xscl_units(
    spark: SparkSession,
    inputs: list[tuple[str, DataFrame]],
    queries: list[tuple[str, str]],
    timestamp: str | None = None,
) -> DataFrame:
    """The results of the queries over the inputs: ``(stream name, units)`` pairs. The
    numbered documents stay cached for the result's uses: ``spark.catalog.clearCache()``
    lets them go once it is written."""
    engine = _engine(tuple(queries))  # the driver's: templates, r_t rows, SQL
    stage1, count = number_documents(witnesses(inputs, queries, timestamp), 0)
    docs = stage1.where("error IS NULL")
    return _results(spark, engine, docs, docs, 0, count - 1).unionByName(_errors(stage1))


def witnesses(inputs, queries: list[tuple[str, str]], timestamp: str | None) -> DataFrame:
    """Stage 1 over the units of each ``(stream, units)`` input: a row per document."""
    from pyspark.sql import functions as F

    engine = _engine(tuple(queries))
    read = {q.query.left.stream for q in engine.queries.values()}
    read |= {q.query.right.stream for q in engine.queries.values() if q.query.right}
    if read & engine.published:
        raise ValueError("xcep spark xscl: queries reading a published stream run in-process")
    streams = [
        units.select(F.lit(n).alias("input"), F.lit(name).alias("stream"), "*")
        for n, (name, units) in enumerate(inputs)
    ]
    all_units = streams[0]
    for more in streams[1:]:
        all_units = all_units.unionByName(more)
    return all_units.mapInArrow(_stage1(tuple(queries), timestamp), STAGE1_SCHEMA)


def number_documents(stage1: DataFrame, first: int) -> tuple[DataFrame, int]:
    """Stage 1's rows, each without an error numbered in stream order (input, file path,
    record, position) from ``first`` (``docid``; null for an error), cached; and how many
    are numbered.

    Stage 1 runs once: each file's rows are numbered within the file (a running count of
    its documents, a window partitioned by file: the rows stay spread over the cluster)
    into the cache; the files' counts, read from it, give each file's first id (a row
    per file, broadcast to the join).
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    good = F.col("error").isNull().cast("long")
    in_file = (
        Window.partitionBy("input", "path")
        .orderBy(F.coalesce("record", F.lit(-1)), "doc")
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    ranked = stage1.withColumn("_in", F.sum(good).over(in_file)).cache()
    counts = ranked.groupBy("input", "path").agg(F.sum(good).alias("n")).collect()
    at, offsets = first, []
    for row in sorted(counts, key=lambda r: (r["input"], r["path"] is not None, r["path"] or "")):
        offsets.append((row["input"], row["path"], at))  # (Spark's order: nulls first)
        at += row["n"]
    table = stage1.sparkSession.createDataFrame(offsets, "input int, path string, _at long")
    numbered = ranked.join(F.broadcast(table), ["input", "path"], "left")
    docid = F.when(F.col("error").isNull(), F.col("_at") + F.col("_in") - 1)
    return numbered.select(*stage1.columns, docid.alias("docid")), at - first


def _errors(stage1: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    return stage1.where(F.col("error").isNotNull()).select(
        F.lit(None).cast("string").alias("query"),
        F.lit(None).cast("array<bigint>").alias("docs"),
        F.lit(None).cast("string").alias("output"),
        F.concat_ws(": ", "doc_id", "error").alias("error"),
    )


def _results(spark, engine, state: DataFrame, batch: DataFrame, lo: int, hi: int) -> DataFrame:
    """The results of the documents ``lo..hi`` (``batch``) joined with ``state`` (all the
    documents still in reach, the batch's included)."""
    results = _one_block_results(batch)
    if hi >= lo and engine.templates:
        results = results.unionByName(_join_results(spark, engine, state, lo, hi))
    return results


def _engine(queries: tuple):
    """The worker's (or driver's) engine of the queries' plan: its templates and SQL."""

    def make():
        from xcep.plans import compile_plan

        return compile_plan("xscl", dict(queries)).engine()

    return _ENGINES.get(queries, make)


def _outputs(engine) -> tuple[set, dict]:
    """The variables some two-block query outputs; each one-block query's variable."""
    joined, single = set(), {}
    for qid, registered in engine.queries.items():
        query = registered.query
        lnames = registered.blocks[0][1]
        if query.right is None:
            single[qid] = (query.left.stream, lnames[(query.select or [query.left.output.var])[0]])
        else:
            rnames = registered.blocks[1][1]
            joined |= {var for _, var in engine.outputs_of(query, lnames, rnames)}
    return joined, single


def _stage1(queries: tuple, timestamp: str | None):
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

        from xcep.spark.units import read_unit
        from xcep.xscl import TimestampError, timestamp_reader
        from xcep.xscl.documents import documents_from_batches

        engine = _engine(queries)
        joined, single = _outputs(engine)
        time_of = timestamp_reader(timestamp)
        schema = _arrow_schema()
        for batch in batches:
            rows: list[dict] = []
            columns = ("input", "stream", "path", "record", "content", "error")
            for n, stream, path, record, content, error in zip(
                *(batch.column(c).to_pylist() for c in columns), strict=True
            ):
                base = {"input": n, "path": path, "record": record}
                if error is not None:
                    rows.append({**base, "doc": 0, "doc_id": path, "error": error})
                    continue
                unit = read_unit(path, record, content)
                for doc_number, (doc_id, doc_batches) in enumerate(unit.good()):
                    doc = next(documents_from_batches(doc_batches))
                    row = {**base, "doc": doc_number, "doc_id": doc_id}
                    try:
                        # without --timestamp, time is the position: the docid, set later
                        row["ts"] = time_of(doc, 0) if timestamp else None
                    except TimestampError as exc:
                        rows.append({**row, "error": str(exc)})
                        continue
                    binw, docw = engine.witness.evaluate(doc, stream)
                    row["strings"] = [{"node": k, "strval": v} for k, v in docw.items()]
                    row["bindings"] = [
                        {"var1": a, "var2": b, "node1": m, "node2": k, "strval": docw[k]}
                        for a, b, m, k in binw
                    ]
                    out_nodes = {k for a, b, _, k in binw if a == b and a in joined}
                    matches = [
                        {"query": qid, "node": k}
                        for qid, (on, var) in single.items()
                        if on == stream
                        for a, b, _, k in binw
                        if a == b == var
                    ]
                    out_nodes |= {m["node"] for m in matches}
                    row["xml"] = [{"node": k, "xml": doc.nodes[k].serialize()} for k in out_nodes]
                    row["matches"] = matches
                    rows.append(row)
                for doc_id, message in unit.bad():
                    rows.append({**base, "doc": -1, "doc_id": doc_id, "error": message})
            yield pa.RecordBatch.from_pylist(rows, schema=schema)

    return run


def _arrow_schema():
    import pyarrow as pa

    strings = pa.list_(pa.struct([("node", pa.int32()), ("strval", pa.string())]))
    bindings = pa.list_(
        pa.struct(
            [
                ("var1", pa.string()),
                ("var2", pa.string()),
                ("node1", pa.int32()),
                ("node2", pa.int32()),
                ("strval", pa.string()),
            ]
        )
    )
    xml = pa.list_(pa.struct([("node", pa.int32()), ("xml", pa.string())]))
    matches = pa.list_(pa.struct([("query", pa.string()), ("node", pa.int32())]))
    return pa.schema(
        [
            ("input", pa.int32()),
            ("path", pa.string()),
            ("record", pa.int64()),
            ("doc", pa.int32()),
            ("doc_id", pa.string()),
            ("ts", pa.float64()),
            ("strings", strings),
            ("bindings", bindings),
            ("xml", xml),
            ("matches", matches),
            ("error", pa.string()),
        ]
    )


def _one_block_results(docs: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    match = docs.select("docid", "xml", F.explode("matches").alias("m"))
    return match.select(
        F.col("m.query").alias("query"),
        F.array(F.col("docid").cast("bigint")).alias("docs"),
        F.filter("xml", lambda x: x["node"] == F.col("m.node"))[0]["xml"].alias("output"),
        F.lit(None).cast("string").alias("error"),
    )


def _join_results(spark: SparkSession, engine, docs: DataFrame, lo: int, hi: int) -> DataFrame:
    """Stage 2: every template's SQL on Spark SQL, then the result documents."""
    from pyspark.sql import functions as F

    docs.select("docid", F.explode("strings").alias("s")).select(
        "docid", "s.node", "s.strval"
    ).createOrReplaceTempView("r_doc")
    docs.select("docid", F.explode("bindings").alias("b")).select(
        "docid", "b.var1", "b.var2", "b.node1", "b.node2", "b.strval"
    ).createOrReplaceTempView("r_bin")
    docs.select(
        "docid", F.coalesce("ts", F.col("docid").cast("double")).alias("ts")
    ).createOrReplaceTempView("r_docts")
    found = None
    for template in engine.templates.values():
        name = f"r_t_{template.index}"
        columns = "rid int, followed boolean, wl double, since bigint, " + ", ".join(
            f"v{i} string" for i in range(template.size)
        )
        rows = engine.db.execute(f"SELECT * FROM {name}").fetchall()
        spark.createDataFrame(rows, columns).createOrReplaceTempView(name)
        sql = engine.sql[template.index].format(lo=lo, hi=hi, left=f"<= {hi}")
        sql = sql.rsplit("\nORDER BY", 1)[0]  # order is the engine's concern; a sort costs jobs
        rows = spark.sql(sql).select(
            "rid", "ldoc", "rdoc", F.array(*(f"n{i}" for i in range(template.size))).alias("n")
        )
        # each template's joins run now, one job each, and only their rows are kept: the
        # driver builds one template's broadcast tables at a time (all of them in one plan
        # ran a 1 GB driver out of memory at 21 templates)
        rows = rows.localCheckpoint(eager=True)
        found = rows if found is None else found.unionByName(rows)
    directed = spark.createDataFrame(
        [
            (
                rid,
                row.registered.query.id,
                row.swapped,
                [side for side, _ in row.outputs],
                [pick for _, pick in row.outputs],
            )
            for rid, row in engine.directed_rows()
        ],
        "rid int, query string, swapped boolean, sides array<int>, picks array<int>",
    )
    joined = found.join(directed, "rid")
    parts = joined.select(
        "query",
        "swapped",
        "ldoc",
        "rdoc",
        "n",
        F.posexplode(F.arrays_zip("sides", "picks")).alias("pos", "pick"),
    ).select(
        "query",
        "swapped",
        "ldoc",
        "rdoc",
        "n",
        "pos",
        F.when(F.col("pick.sides") == 0, F.col("ldoc")).otherwise(F.col("rdoc")).alias("docid"),
        F.element_at("n", F.col("pick.picks") + 1).alias("node"),
    )
    xml = docs.select("docid", F.explode("xml").alias("x")).select("docid", "x.node", "x.xml")
    assembled = (
        parts.join(xml, ["docid", "node"])
        .groupBy("query", "swapped", "ldoc", "rdoc", "n")
        .agg(F.sort_array(F.collect_list(F.struct("pos", "node", "xml"))).alias("parts"))
    )
    results = assembled.select(
        "query",
        F.when(F.col("swapped"), F.array("rdoc", "ldoc"))
        .otherwise(F.array("ldoc", "rdoc"))
        .cast("array<bigint>")
        .alias("docs"),
        F.transform("parts", lambda p: p["node"]).alias("nodes"),
        F.concat(F.lit("<result>"), F.array_join("parts.xml", ""), F.lit("</result>")).alias(
            "output"
        ),
    )
    return results.dropDuplicates(["query", "docs", "nodes"]).select(
        "query", "docs", "output", F.lit(None).cast("string").alias("error")
    )


def run_stream(
    spark: SparkSession,
    inputs: list[tuple[str, DataFrame]],
    queries: list[tuple[str, str]],
    output: str,
    checkpoint: str,
    timestamp: str | None = None,
    format: str = "json",
    trigger: str = "available-now",
) -> None:
    """XSCL in Structured Streaming: join state kept across micro-batches, exactly-once.

    ``foreachBatch`` runs Stage 1 and Stage 2 per micro-batch: the batch's documents
    (numbered after those of earlier batches) are saved under ``CHECKPOINT/xscl-state/
    batch=K`` (Parquet), joined with every saved document still in reach, and their
    results written to ``OUTPUT/batch=K``. Both are overwritten when a batch runs again
    after a restart, so the output holds every result once. After each batch, saved
    batches whose documents are all older than the widest window allows are deleted.
    """
    import math
    import os

    from pyspark.sql import functions as F

    engine = _engine(tuple(queries))
    widest = max((r.registered.query.window for _, r in engine.directed_rows()), default=0.0)
    state_dir = os.path.join(checkpoint, "xscl-state")
    stage1 = witnesses(inputs, queries, timestamp)

    def process(batch_df: DataFrame, batch_id: int) -> None:
        batch_df = batch_df.cache()
        good = batch_df.where("error IS NULL")
        count, newest = good.agg(F.count("*"), F.max("ts")).first()
        summaries = _summaries(state_dir, batch_id)
        first = max((s["first"] + s["count"] for s in summaries.values()), default=0)
        if count and newest is None:  # no --timestamp: time is the position
            newest = first + count - 1
        here = f"{state_dir}/batch={batch_id}"
        numbered, _ = number_documents(good, first)
        numbered.drop("path", "record", "doc").write.mode("overwrite").parquet(here)
        _write_summary(state_dir, batch_id, {"first": first, "count": count, "max_ts": newest})
        saved = spark.read.parquet(here)
        prior = _saved(spark, state_dir, summaries)
        state = saved if prior is None else prior.unionByName(saved)
        results = _results(spark, engine, state, saved, first, first + count - 1)
        results = results.unionByName(_errors(batch_df))
        if format == "console":
            from xcep.spark.sinks import print_rows

            print_rows(results.collect(), None)
        else:
            results.write.mode("overwrite").format(format).save(f"{output}/batch={batch_id}")
        if count and not math.isinf(widest):
            _evict(state_dir, summaries, newest - widest)
        spark.catalog.clearCache()  # this batch's cached input

    writer = stage1.writeStream.foreachBatch(process).option("checkpointLocation", checkpoint)
    if trigger == "available-now":
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=trigger)
    writer.start().awaitTermination()


def _summaries(state_dir: str, before: int) -> dict[int, dict]:
    """Per saved batch before ``before``: its first document id, document count and
    newest timestamp (kept after its documents are evicted: the numbering needs them)."""
    import json
    import os

    folder = state_dir.removeprefix("file:")
    if not os.path.isdir(folder):
        return {}
    out = {}
    for name in os.listdir(folder):
        if name.startswith("summary-") and name.endswith(".json"):
            batch = int(name[len("summary-") : -len(".json")])
            if batch < before:
                with open(os.path.join(folder, name)) as handle:
                    out[batch] = json.load(handle)
    return out


def _write_summary(state_dir: str, batch: int, summary: dict) -> None:
    import json
    import os

    folder = state_dir.removeprefix("file:")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"summary-{batch}.json")
    with open(path + ".tmp", "w") as handle:
        json.dump(summary, handle)
    os.replace(path + ".tmp", path)  # atomic: a crash leaves the old one or the new one


def _saved(spark: SparkSession, state_dir: str, summaries: dict) -> DataFrame | None:
    """The saved documents of the earlier batches still kept (None: there are none)."""
    import os

    folder = state_dir.removeprefix("file:")
    kept = [b for b in sorted(summaries) if os.path.isdir(os.path.join(folder, f"batch={b}"))]
    frames = [spark.read.parquet(f"{state_dir}/batch={b}") for b in kept if summaries[b]["count"]]
    if not frames:
        return None
    state = frames[0]
    for frame in frames[1:]:
        state = state.unionByName(frame)
    return state


def _evict(state_dir: str, summaries: dict, cut: float) -> None:
    """Delete the saved batches whose documents are all older than ``cut`` (no window can
    reach them any more; timestamps are taken as non-decreasing)."""
    import os
    import shutil

    folder = state_dir.removeprefix("file:")
    for batch, summary in summaries.items():
        if summary["max_ts"] is not None and summary["max_ts"] < cut:
            shutil.rmtree(os.path.join(folder, f"batch={batch}"), ignore_errors=True)
