"""One interface to the four engines: plans and runs.

``compile_plan(kind, queries, **options)`` compiles queries of one language
(``filter``, ``xseq``, ``xquery``, ``xscl``; ``queries``: id → text) into a
``Plan``: immutable once made, and the same for every run. ``plan.start()``
gives a ``Run``, which is fed the stream's event batches one at a time and
gives ``Row``s as they are known:

    run = plan.start()
    for batch in EventStream(inputs).batches():
        for row in run.feed(batch):
            ...
    rows = run.finish()  # what only the end of the stream decides

``run.snapshot()`` saves a run as bytes (versioned, checked against the plan)
and ``plan.restore(data)`` — in this process or another — gives a run that
goes on where it stopped; ``run.add(id, text)`` and ``run.remove(id)`` change
the queries of a running plan where the engine allows it (from the next
document on); ``plan.explain()`` and ``run.stats()`` describe them, with the
keys ``queries``, ``documents`` and ``rows`` in every engine. Where an engine
cannot do something (add a query to a plan of one XQuery query), it raises
``StateError`` saying so; ``plan.can`` lists what it can.

A row is ``(query, doc, value)``: for filters one row per document, ``query``
None and ``value`` the matching filter ids, ascending; for XSeq, XQuery and
XSCL one row per result, ``value`` what the command line prints for it (an
XSeq row's list, an XQuery item's serialization, an XSCL result's JSON) and
``doc`` the document it came from where the engine knows it.

The command line, Spark and the service are to run on nothing else (issue 30):
this module is their single entrance to the engines.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import pickle
from typing import ClassVar, NamedTuple

import numpy as np

from xcep.collector import collector_paused
from xcep.errors import StateError
from xcep.events.model import CLOSE, EventBatch
from xcep.events.stepping import Stepper, ThreadStepper

MAGIC = b"xcep-run\n"
VERSION = 1


class Row(NamedTuple):
    query: object  # the query's id (None for a document's filters)
    doc: int | None  # the document it came from, where the engine knows it
    value: object


class Plan:
    """Compiled queries of one language (subclasses: one per engine)."""

    kind: ClassVar[str]
    can: ClassVar[frozenset] = frozenset()  # of "snapshot", "add", "remove"

    def __init__(self, queries: dict, **options) -> None:
        self.queries = dict(queries)
        self.options = options

    def fingerprint(self, queries: dict | None = None) -> str:
        """What a snapshot is checked against: the kind, the queries (``queries``, those
        of a run that changed them; the plan's by default) and the options."""
        queries = self.queries if queries is None else queries
        text = json.dumps(
            [self.kind, sorted((str(k), v) for k, v in queries.items()), self.options],
            sort_keys=True,
            default=str,
        )
        return hashlib.sha256(text.encode()).hexdigest()

    def start(self) -> Run:
        raise NotImplementedError

    def rows(self, batches) -> list[Row]:
        """The rows of one run over ``batches`` to their end (a document, a partition)."""
        run = self.start()
        try:
            rows = []
            for batch in batches:
                rows += run.feed(batch)
            return rows + run.finish()
        finally:
            run.close()

    def restore(self, data: bytes) -> Run:
        """The run that ``data`` (``Run.snapshot``) saved."""
        if not isinstance(data, bytes | bytearray) or not data.startswith(MAGIC):
            raise StateError("not a run snapshot")
        try:
            saved = pickle.loads(data[len(MAGIC) :])
        except Exception as exc:  # truncated or damaged
            raise StateError(f"a damaged run snapshot ({type(exc).__name__})") from None
        if saved.get("version") != VERSION:
            raise StateError(f"a run snapshot of version {saved.get('version')}, not {VERSION}")
        if saved.get("kind") != self.kind or saved.get("plan") != self.fingerprint():
            raise StateError(
                "the snapshot was saved by another plan (queries or options): a run whose "
                "queries changed is restored by a plan of the queries it had then"
            )
        return self._restore(saved["state"])

    def _restore(self, state) -> Run:
        raise StateError(f"{self.kind} runs cannot be saved yet")

    def explain(self) -> str:
        raise NotImplementedError


class Run:
    """One pass of a plan over a stream, fed a batch at a time."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.documents = 0
        self.rows = 0
        self.finished = False

    def feed(self, batch: EventBatch) -> list[Row]:
        """The rows known once ``batch`` is read. The cyclic collector waits meanwhile:
        a batch's results (millions of rows in a join) would make it scan the heap again
        and again (3x the run's time); what it would free is freed after the batch."""
        if self.finished:
            raise StateError("this run is finished: start or restore another")
        with collector_paused():
            rows = self._feed(batch)
        self.rows += len(rows)
        return rows

    def finish(self) -> list[Row]:
        if self.finished:
            return []
        self.finished = True
        with collector_paused():
            rows = self._finish()
        self.rows += len(rows)
        return rows

    def snapshot(self) -> bytes:
        if self.finished:
            raise StateError("this run is finished: nothing is left to save")
        saved = {
            "version": VERSION,
            "kind": self.plan.kind,
            "plan": self.plan.fingerprint(self.queries()),
            "state": self._state(),
        }
        return MAGIC + pickle.dumps(saved, protocol=pickle.HIGHEST_PROTOCOL)

    def queries(self) -> dict:
        """id → text of the queries it runs now (the plan's, then those added, less
        those removed)."""
        return dict(self.plan.queries)

    def add(self, query_id, text: str) -> None:
        raise StateError(f"{self.plan.kind} queries cannot be added to a running plan yet")

    def remove(self, query_id) -> None:
        raise StateError(f"{self.plan.kind} queries cannot be removed from a running plan yet")

    def stats(self) -> dict:
        return {"queries": len(self.plan.queries), "documents": self.documents, "rows": self.rows}

    def close(self) -> None:
        """Let the run go without finishing it (a run with a thread ends it)."""

    def _feed(self, batch: EventBatch) -> list[Row]:
        raise NotImplementedError

    def _finish(self) -> list[Row]:
        return []

    def _state(self):
        raise StateError(f"{self.plan.kind} runs cannot be saved yet")


def _documents_ended(batch: EventBatch) -> int:
    """How many documents end in ``batch`` (their root closes)."""
    kinds = np.frombuffer(batch.kinds, np.uint8)
    depths = np.frombuffer(batch.depths, np.int32)
    return int(np.count_nonzero((kinds == CLOSE) & (depths == 1)))


class OpenDocument:
    """The events read so far of the document still open after the last batch: what a
    run whose state between documents is empty saves (and reads again when restored)."""

    def __init__(self) -> None:
        self.batches: list[EventBatch] = []
        self.number = None

    def note(self, batch: EventBatch) -> None:
        """Take in the batch just fed."""
        n = len(batch)
        if n == 0 or (batch.kinds[n - 1] == CLOSE and batch.depths[n - 1] == 1):
            self.batches, self.number = [], None  # it ends at a document's end
            return
        *_, (number, start, end) = batch.document_runs()
        tail = batch.slice(start, end)
        if number == self.number:
            self.batches.append(tail)
        else:
            self.batches, self.number = [tail], number


# -- filters (xcep.xpush) ------------------------------------------------------------


class FilterPlan(Plan):
    """Boolean XPath filters (``xcep.xpush``): one row per document, its filters.

    ``queries`` is id → text, or a ``Workload`` already parsed (a filters file read
    with its bad lines reported). Options: the ``MachineOptions`` (``top_down``,
    ``order``, ``early``, ``max_entries``), ``dtd`` (a DTD file: with ``order`` its
    element order prunes states, with ``train`` its structure shapes the training
    documents), ``train`` (warm the tables before the first document) and ``answers``:
    ``"ids"`` (a row's value the list of ids) or ``"json"`` (the text of that list,
    written in C without a Python object per id)."""

    kind = "filter"
    can = frozenset({"snapshot", "add", "remove"})

    def __init__(
        self,
        queries,
        dtd: str | None = None,
        train: bool = False,
        answers: str = "ids",
        **options,
    ) -> None:
        from xcep.xpush import MachineOptions, Workload

        parsed = queries if isinstance(queries, Workload) else None
        texts = parsed.texts if parsed is not None else queries  # (copied by Plan)
        super().__init__(texts, dtd=dtd, train=train, answers=answers, **options)
        if answers not in ("ids", "json"):
            raise ValueError(f"answers are 'ids' or 'json', not {answers!r}")
        if options.get("order") and dtd is None:
            raise ValueError("order needs a DTD (the order of elements comes from it)")
        self.machine_options = MachineOptions(**options)
        self.schema = None
        if dtd is not None:
            from xcep.schema import read_dtd

            self.schema = read_dtd(dtd)
        # parsed once (a bad filter fails here), and lent to the first run: a machine
        # changes its workload as filters come and go, so later runs parse their own
        with collector_paused():  # many filters: every object new
            self._workload = parsed if parsed is not None else Workload(self.queries)

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_workload": None}  # a plan travels as its queries

    def start(self, filters: dict | None = None) -> FilterRun:
        from xcep.xpush import Workload

        workload, self._workload = self._workload, None
        if filters is not None or workload is None:
            with collector_paused():
                workload = Workload(self.queries if filters is None else filters)
        return FilterRun(self, workload)

    def _restore(self, state) -> FilterRun:
        run = self.start(state["filters"])
        run.documents = state["documents"]
        for batch in state["open"]:  # the open document's events: read again
            run.feed(batch)
        return run

    def explain(self) -> str:
        stats = self.start().machine.stats_dict()
        return (
            f"{len(self.queries)} filters, one lazy XPush machine: {stats['afa_states']} AFA "
            f"states, {stats['atomic_predicates']} atomic predicates"
        )


class FilterRun(Run):
    def __init__(self, plan: FilterPlan, workload) -> None:
        super().__init__(plan)
        from xcep.xpush import XPushMachine

        order_facts = plan.schema if plan.machine_options.order else None
        self.machine = XPushMachine(workload, plan.machine_options, order_facts)
        if plan.options["train"]:
            self.machine.train(plan.schema)
        as_json = plan.options["answers"] == "json"
        self.pass_ = Stepper(lambda batches: self.machine.run(batches, as_json=as_json))
        self.open = OpenDocument()

    def _feed(self, batch: EventBatch) -> list[Row]:
        found = self.pass_.feed(batch)
        self.documents += len(found)
        self.open.note(batch)
        return [Row(None, doc, ids) for doc, ids in found]

    def _finish(self) -> list[Row]:
        found = self.pass_.end()
        self.documents += len(found)
        return [Row(None, doc, ids) for doc, ids in found]

    def _state(self):
        return {
            "filters": self.machine.filters(),
            "open": self.open.batches,
            "documents": self.documents,
        }

    def queries(self) -> dict:
        return self.machine.filters()

    def add(self, query_id, text: str) -> None:
        self.machine.add_filter(query_id, text)

    def remove(self, query_id) -> None:
        self.machine.remove_filter(query_id)

    def stats(self) -> dict:
        return {**self.machine.stats_dict(), **super().stats(), "queries": len(self.machine)}


# -- XSeq (xcep.xseq) ----------------------------------------------------------------


class XSeqPlan(Plan):
    """XSeq queries: one query on its runtime, several in one automaton (queries added
    and removed while it runs). Every run is saved: one query's by its runtime
    (``XSeqEngine.start``), several queries' with their automaton.

    Options: ``selection``, ``values_only``, ``schema`` and ``opt`` (``XSeqEngine``),
    ``fast`` (one query: its fast runtime where it qualifies, else the automaton), and
    ``skip_invalid``: a query that does not compile is left out and named in
    ``plan.invalid`` (id → its error) instead of failing the plan."""

    kind = "xseq"

    def __init__(self, queries: dict, skip_invalid: bool = False, **options) -> None:
        super().__init__(queries, skip_invalid=skip_invalid, **options)
        from xcep.xseq import QuerySyntaxError, XSeqEngine, XSeqMultiEngine, compile_query

        self.invalid: dict = {}
        fast = options.pop("fast", True)
        if len(self.queries) == 1 and not skip_invalid:
            ((self.single_id, text),) = self.queries.items()
            self.engine = XSeqEngine(text, fast=fast, **options)
            self.can = frozenset({"snapshot"})
            return
        self.single_id = None
        self.engine = None
        self.can = frozenset({"snapshot", "add", "remove"})
        self.engine_options = options
        XSeqMultiEngine(**options)  # the options are checked here
        schema, opt = options.get("schema"), options.get("opt", "all")
        self.analyses: dict = {}  # id → the query compiled: what every run subscribes
        for qid, text in self.queries.items():
            try:
                self.analyses[qid] = compile_query(text, schema, opt)
            except (QuerySyntaxError, ValueError) as error:
                if not skip_invalid:
                    raise
                self.invalid[qid] = error
        for qid in self.invalid:
            del self.queries[qid]

    def start(self) -> XSeqRun:
        return XSeqRun(self)

    def _restore(self, state) -> XSeqRun:
        run = XSeqRun(self, state)
        run.documents = state["documents"]
        return run

    def explain(self, format: str = "text") -> str:
        """One query: its analysis and automaton (``dot``: the automaton for Graphviz);
        several: their automata's statistics, per partition clause (JSON)."""
        if self.engine is None:
            return json.dumps(self.start().multi.stats(), indent=2)
        if format == "dot":
            return self.engine.vpa.dot()
        return self.engine.explain()


class XSeqRun(Run):
    def __init__(self, plan: XSeqPlan, saved: dict | None = None) -> None:
        super().__init__(plan)
        if plan.engine is not None:  # one query: its runtime's run
            engine = plan.engine
            self.run = engine.resume(saved["run"]) if saved else engine.start()
            return
        if saved:  # several: the automaton and its driver, as saved
            self.multi, self.driver, self.texts = saved["multi"], saved["driver"], saved["texts"]
            return
        from xcep.xseq import XSeqMultiEngine

        self.multi = XSeqMultiEngine(**plan.engine_options)
        self.texts = dict(plan.queries)
        for qid, analysis in plan.analyses.items():
            self.multi.subscribe(qid, analysis)
        self.driver = self.multi.start()

    def _rows(self, found: list) -> list[Row]:
        if self.plan.engine is not None:
            return [Row(self.plan.single_id, None, row) for row in found]
        return [Row(row[0], None, row[1:]) for row in found]

    def _feed(self, batch: EventBatch) -> list[Row]:
        self.documents += _documents_ended(batch)
        if self.plan.engine is not None:
            return self._rows(self.run.feed([batch]))
        return self._rows(self.driver.feed(batch))

    def _finish(self) -> list[Row]:
        if self.plan.engine is not None:
            return self._rows(self.run.finish())
        return self._rows(self.driver.finish())

    def _state(self):
        if self.plan.engine is not None:
            return {"run": self.run.snapshot(), "documents": self.documents}
        return {
            "multi": self.multi,
            "driver": self.driver,
            "texts": self.texts,
            "documents": self.documents,
        }

    def queries(self) -> dict:
        return dict(self.texts) if self.plan.engine is None else dict(self.plan.queries)

    def add(self, query_id, text: str) -> None:
        if self.plan.engine is not None:
            raise StateError("queries are added to a plan of several XSeq queries")
        self.multi.subscribe(query_id, text)
        self.texts[query_id] = text

    def remove(self, query_id) -> None:
        if self.plan.engine is not None:
            raise StateError("queries are removed from a plan of several XSeq queries")
        self.multi.unsubscribe(query_id)
        del self.texts[query_id]

    def stats(self) -> dict:
        engine = self.plan.engine
        found = engine.stats() if engine is not None else self.multi.stats()
        return {**found, **super().stats(), "queries": len(self.queries())}


# -- XQuery (xcep.xquery) --------------------------------------------------------------


class XQueryPlan(Plan):
    """One XQuery query (``queries``: one id → text). A window over a stream
    (``xcep.xquery.streaming``) gives its rows as windows close, across documents;
    any other query runs on whole documents, read as they complete and evaluated at
    the end (a run saves the documents read so far) —
    or, with ``per_document=True`` (a service: every message a document of its own),
    on each document as it completes, ``$input`` that document."""

    kind = "xquery"
    can = frozenset({"snapshot"})

    def __init__(
        self, queries: dict, per_document: bool = False, variables: dict | None = None
    ) -> None:
        super().__init__(queries, per_document=per_document, variables=variables)
        from xcep import xquery

        self.per_document = per_document
        self.variables = variables  # external variables' values (``--var``)
        if len(self.queries) != 1:
            raise ValueError("an XQuery plan holds one query")
        ((self.query_id, text),) = self.queries.items()
        self.query = xquery.compile(text)
        self.streams = self.query.stream_plan[0] is not None  # (then not per document)

    def start(self) -> XQueryRun:
        return XQueryStreamRun(self) if self.streams else XQueryRun(self)

    def _restore(self, state) -> XQueryRun:
        import xml.etree.ElementTree as ET

        if self.streams:
            return XQueryStreamRun(self, state)
        run = XQueryRun(self)
        run.trees = [ET.ElementTree(ET.fromstring(data)) for data in state["documents"]]
        run.documents = len(run.trees)
        for batch in state["open"]:
            run.feed(batch)
        return run

    def explain(self) -> str:
        return self.query.explain()


class XQueryRun(Run):
    def __init__(self, plan: XQueryPlan) -> None:
        super().__init__(plan)
        from xcep.xquery.documents import documents_from_batches

        self.trees: list = []
        self.pass_ = Stepper(documents_from_batches)
        self.open = OpenDocument()

    def _feed(self, batch: EventBatch) -> list[Row]:
        found = self.pass_.feed(batch)
        self.documents += len(found)
        rows = []
        if self.plan.per_document:
            qid = self.plan.query_id
            query, variables = self.plan.query, self.plan.variables
            rows = [Row(qid, None, line) for tree in found for line in query.run([tree], variables)]
        else:
            self.trees += found
        self.open.note(batch)
        return rows

    def _finish(self) -> list[Row]:
        if self.plan.per_document:
            return []
        self.trees += self.pass_.end()
        qid = self.plan.query_id
        lines = self.plan.query.run(self.trees or None, self.plan.variables)
        return [Row(qid, None, line) for line in lines]

    def _state(self):
        import xml.etree.ElementTree as ET

        return {
            "documents": [ET.tostring(t.getroot()) for t in self.trees],
            "open": self.open.batches,
        }


class XQueryStreamRun(Run):
    """A window over a stream: the query's own pass (``XQuery.stream``), in a thread of
    its own (its items are asked for inside the window clause). Between two batches
    that thread waits for the next one, and where it stands is a ``StreamState`` (the
    items a window can still reach, the item being read): a saved run."""

    def __init__(self, plan: XQueryPlan, saved: dict | None = None) -> None:
        super().__init__(plan)
        from xcep.xquery.streaming import StreamState
        from xcep.xquery.values import serialize

        query, stream_plan = plan.query, plan.query.stream_plan[0]
        self.serialize = serialize
        self.state = saved["stream"] if saved else StreamState(stream_plan)
        self.documents = saved["documents"] if saved else 0
        state = self.state
        variables = plan.variables
        self.pass_ = ThreadStepper(
            lambda batches: query.stream(stream_plan, batches, variables, state)
        )

    def _rows(self, items: list) -> list[Row]:
        return [Row(self.plan.query_id, None, self.serialize(item)) for item in items]

    def _feed(self, batch: EventBatch) -> list[Row]:
        self.documents += _documents_ended(batch)
        return self._rows(self.pass_.feed(batch))

    def _finish(self) -> list[Row]:
        return self._rows(self.pass_.end())

    def _state(self):
        return {"stream": self.state, "documents": self.documents}

    def close(self) -> None:
        with contextlib.suppress(Exception):  # its error was the caller's business already
            self.pass_.end()


# -- XSCL (xcep.xscl) ------------------------------------------------------------------


AUTO_BATCH = 500  # the largest batch of ``batch="auto"``


class XsclPlan(Plan):
    """XSCL join queries over named streams (documents fed are on ``stream``, default
    ``S``, until ``XsclRun.begin_stream`` names another); results as each batch of
    documents is joined.

    Options: ``batch``, the documents joined together — a number (a batch waits to
    fill) or ``"auto"`` (the default: the documents each fed event batch completes,
    at most ``AUTO_BATCH``: nothing waits for a batch to fill); ``grouped`` (one
    result for the queries that find the same documents and nodes); ``timestamp``
    (where a document's time is: ``timestamp_reader``; by default its position);
    ``skip_invalid`` (a query that does not compile is left out and named in
    ``plan.invalid``); and the ``XsclEngine``'s ``join``, ``view``, ``view_budget``
    and ``state_budget``."""

    kind = "xscl"
    can = frozenset({"snapshot", "add", "remove"})

    def __init__(
        self,
        queries: dict,
        stream: str = "S",
        batch: int | str = "auto",
        grouped: bool = False,
        timestamp: str | None = None,
        skip_invalid: bool = False,
        **options,
    ) -> None:
        super().__init__(
            queries,
            stream=stream,
            batch=batch,
            grouped=grouped,
            timestamp=timestamp,
            skip_invalid=skip_invalid,
            **options,
        )
        from xcep.xscl import XsclEngine, XsclSyntaxError, timestamp_reader

        if batch != "auto" and (not isinstance(batch, int) or batch < 1):
            raise ValueError(f"batch is a number ≥ 1 or 'auto', not {batch!r}")
        self.stream = stream
        self.batch_size = AUTO_BATCH if batch == "auto" else batch
        self.timestamp = timestamp_reader(timestamp)  # a bad path fails here
        self.engine_options = {"batch_size": self.batch_size, **options}
        engine = XsclEngine(**self.engine_options)
        self.invalid: dict = {}
        for qid, text in self.queries.items():
            try:
                engine.add(qid, text)
            except XsclSyntaxError as error:
                if not skip_invalid:
                    raise
                self.invalid[qid] = error
        for qid in self.invalid:
            del self.queries[qid]
        self._engine = engine  # lent to the first run (an engine changes as it joins)

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_engine": None}

    def start(self) -> XsclRun:
        return XsclRun(self)

    def _restore(self, state) -> XsclRun:
        from xcep.xscl import XsclEngine

        run = XsclRun(self, XsclEngine.restore(state["engine"], **self.engine_options))
        run.documents, run.stream = state["documents"], state["stream"]
        run.waiting = state["waiting"]
        for batch in state["open"]:
            run.feed(batch)
        return run

    def engine(self):
        """A new ``XsclEngine`` holding the plan's queries, their templates and SQL
        ready: what a run joins with, and what Spark's job reads to join across its
        executors (``xcep.spark.xscl``)."""
        from xcep.xscl import XsclEngine

        engine = XsclEngine(**self.engine_options)
        for qid, text in self.queries.items():
            engine.add(qid, text)
        engine.flush_queries()
        return engine

    def explain(self) -> str:
        return f"{len(self.queries)} XSCL queries over the stream {self.stream}"


class XsclRun(Run):
    """A saved run holds the documents the join state holds (and the queries they met):
    a restored one joins them again, giving nothing for them. A document whose time
    cannot be read is skipped, its error kept in ``errors`` (one line each) for the
    caller to report."""

    def __init__(self, plan: XsclPlan, engine=None) -> None:
        super().__init__(plan)
        from xcep.xscl.documents import documents_from_batches

        if engine is None:
            engine, plan._engine = plan._engine, None
        self.engine = engine if engine is not None else plan.engine()
        self.stream = plan.stream
        self.waiting: list = []  # (stream, document, time) not joined yet
        self.errors: list[str] = []
        self.failed = None  # the error a join raised, for the next call
        self.pass_ = Stepper(documents_from_batches)
        self.open = OpenDocument()

    def begin_stream(self, name: str) -> list[Row]:
        """The documents fed from now on are of the stream ``name``: those waiting for a
        batch to fill are joined first (their rows)."""
        self._failed()
        rows = self._join(everything=True)
        self.stream = name
        return rows

    def _take(self, documents: list) -> None:
        from xcep.xscl import TimestampError

        for doc in documents:
            position = self.documents
            self.documents += 1
            try:
                time = self.plan.timestamp(doc, position)
            except TimestampError as error:
                self.errors.append(f"{self.stream} document {position}: {error}")
                continue
            self.waiting.append((self.stream, doc, time))

    def _join(self, everything: bool) -> list[Row]:
        """Join the waiting documents in batches of the plan's size (and the last, short
        one when ``everything``)."""
        from xcep.xscl.engine import StateBudgetError

        size, waiting = self.plan.batch_size, self.waiting
        grouped = self.plan.options["grouped"]
        rows: list[Row] = []
        start = 0
        try:
            while len(waiting) - start >= size or (everything and start < len(waiting)):
                batch = waiting[start : start + size]
                start += len(batch)
                rows += _xscl_rows(self.engine.process(batch, grouped))
        except StateBudgetError as error:  # raised at the next call, after these rows
            rows += _xscl_rows(error.results)
            self.failed = error
        del waiting[:start]
        return rows

    def _feed(self, batch: EventBatch) -> list[Row]:
        self._failed()
        self._take(self.pass_.feed(batch))
        self.open.note(batch)
        return self._join(everything=self.plan.options["batch"] == "auto")

    def _finish(self) -> list[Row]:
        self._failed()
        self._take(self.pass_.end())
        return self._join(everything=True)

    def _failed(self) -> None:
        """A join that failed (its state budget) gave the rows found before it; the
        error comes now."""
        if self.failed is not None:
            raise self.failed

    def _state(self):
        return {
            "engine": self.engine.snapshot(),
            "open": self.open.batches,
            "documents": self.documents,
            "stream": self.stream,
            "waiting": self.waiting,
        }

    def queries(self) -> dict:
        return {qid: registered.text for qid, registered in self.engine.queries.items()}

    def add(self, query_id, text: str) -> None:
        self.engine.add(query_id, text)

    def remove(self, query_id) -> None:
        self.engine.remove(query_id)

    def stats(self) -> dict:
        state = self.engine.state_size()
        return {**super().stats(), "queries": len(self.engine.queries), "join state": state}


def _xscl_rows(results: list) -> list[Row]:
    """Rows of XSCL results (a join can have millions: ``tuple.__new__`` is twice as
    quick as ``Row(...)``)."""
    new = tuple.__new__
    return [new(Row, (r.query, None, r.to_json())) for r in results]


PLANS = {plan.kind: plan for plan in (FilterPlan, XSeqPlan, XQueryPlan, XsclPlan)}


def compile_plan(kind: str, queries: dict, **options) -> Plan:
    """Compile ``queries`` (id → text) of the language ``kind`` into a plan."""
    try:
        plan = PLANS[kind]
    except KeyError:
        raise ValueError(f"no engine for {kind!r}: one of {', '.join(PLANS)}") from None
    return plan(queries, **options)
