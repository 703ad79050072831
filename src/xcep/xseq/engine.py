"""XSeq engines: ``XSeqEngine`` (one query on its runtime: the path runtime, the
flat-sequence runtime, the compiled automaton (``vm.py``) or the pushdown automaton,
``AutomatonRun``) and
``XSeqMultiEngine`` (many queries in one automaton). The automaton itself:
``program.py`` (what it runs), ``automaton.py`` (a run), ``emitters.py`` (matches
out), ``routing.py`` (events in).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import replace

from xcep.errors import StateError
from xcep.events import EventBatch
from xcep.xseq import ast as A
from xcep.xseq.emitters import Emitter, Outputs, Tagged, TemplateEmitter
from xcep.xseq.lifting import HIDDEN, lift_predicates
from xcep.xseq.matches import (
    check_selection,
)
from xcep.xseq.optimize import optimize
from xcep.xseq.parser import parse_query
from xcep.xseq.pathrun import PlainPathRun
from xcep.xseq.paths import PlainPath
from xcep.xseq.program import Program, template_key
from xcep.xseq.routing import Driver, Group, Stream, drive, partition_key
from xcep.xseq.runs import XSeqRun
from xcep.xseq.runs import load as load_run
from xcep.xseq.semantics import Analysis, NotFast, analyze
from xcep.xseq.sequence import SequencePattern, SequenceRun
from xcep.xseq.vm import CompiledPlan, CompiledRun, NotCompiled, compiled_plan
from xcep.xseq.vm_multi import CompiledDriver
from xcep.xseq.vpa import Vpa


def compile_query(query, schema=None, opt: str = "all", lift: bool = False) -> Analysis:
    """A query (its text, parsed, or already analysed) optimized for ``schema`` by the
    rewrites of ``opt`` and analysed: what an engine runs, made once. ``lift``: with
    its step predicates as conditions (``xcep.xseq.lifting``), to share a template."""
    if isinstance(query, Analysis):
        return query
    parsed = parse_query(query) if isinstance(query, str) else query
    optimized = optimize(parsed, schema, opt)
    return analyze(lift_predicates(optimized) if lift else optimized)


def compile_fast_path(analysis: Analysis, selection: str = "all", fields_by_shape=None):
    """A plain path or a flat sequence pattern for the query, or why neither takes it
    (``fields_by_shape``: what flat sequence patterns of several queries share,
    ``SequencePattern``).

    Under a selection policy other than ``all`` the path runtime takes node selections
    only (no variable: each match starts where it ends, and every policy keeps them all);
    the flat-sequence runtime applies every policy (but ``skip-past-last`` where lists
    nest: which match it keeps in an inner list depends on the outer one's)."""
    if analysis.mode == "nodes":
        if selection != "all" and any(not v.startswith(HIDDEN) for v in analysis.variables):
            return f"selection {selection} over a path that binds variables runs on the automaton"
        kinds = (PlainPath,)
    elif selection == "all":
        kinds = (PlainPath, SequencePattern)
    else:
        kinds = (SequencePattern,)
    for kind in kinds:
        try:
            found = kind(analysis, fields_by_shape) if kind is SequencePattern else kind(analysis)
        except NotFast as why:
            reason = str(why)
            continue
        if selection == "skip-past-last" and getattr(found, "anywhere", False):
            return "selection skip-past-last over lists under a // step runs on the automaton"
        return found
    return reason


# what runs a query (``XSeqEngine(runtime=…)``)
RUNTIMES = ("auto", "compiled", "path", "sequence", "automaton")


def _chosen(found, runtime: str):
    """The fast path ``runtime`` keeps of what ``compile_fast_path`` found, or why none
    runs the query (then the compiled automaton does). ``auto`` keeps the flat-sequence
    runtime where it counts the matches (folded in its step function: faster than the
    compiled automaton, bench/README.md *xseq-runtimes*), not where it makes a row or an
    aggregate per match in Python (the compiled automaton makes them in C: faster); it
    leaves node selections to the compiled automaton (faster on most of them), and the
    path runtime to ``path``."""
    if isinstance(found, str):
        return found
    if isinstance(found, PlainPath) and runtime != "path":
        return "the path runtime runs a node selection where asked for"
    if isinstance(found, SequencePattern) and runtime == "path":
        return "not a node selection"
    if isinstance(found, SequencePattern) and runtime == "auto" and not found.count_only:
        return "the flat-sequence runtime makes rows where asked for (it counts faster)"
    return found


class XSeqEngine:
    """Runs one XSeq query over an event stream and yields its output rows.

    >>> import io
    >>> from xcep.events import EventStream
    >>> engine = XSeqEngine("/stocks/t[@price > 10]/@id")
    >>> data = io.BytesIO(b'<stocks><t id="a" price="12"/><t id="b" price="9"/></stocks>')
    >>> list(engine.run(EventStream([data]).batches()))
    [['a']]
    """

    def __init__(
        self,
        query,
        selection: str = "all",
        values_only: bool = False,
        schema=None,
        opt: str = "all",
        fast: bool = True,
        runtime: str = "auto",
    ) -> None:
        """``schema`` (a ``Dtd`` or ``LearnedSchema``) enables the rewrites of ``opt``
        (``xcep.xseq.optimize``: none, prefix, loops, where or all; where needs no schema).
        ``fast``: run a flat sequence pattern (``xcep.xseq.sequence``) on its runtime when
        it qualifies; False always runs the automaton. ``runtime``: ``auto`` (the
        flat-sequence runtime where it takes the query and counts its matches, else the
        compiled automaton, else the Python automaton), ``compiled`` (the compiled
        automaton where it takes the query), ``path`` (the path runtime,
        ``xcep.xseq.paths``, where it takes a node selection: faster than the compiled
        automaton on some flat streams, slower on deep documents, bench/README.md
        *xseq-runtimes*; a file of queries shares it),
        ``sequence`` (the flat-sequence runtime where it takes the query, whatever its
        outputs) or ``automaton`` (the Python automaton, as ``fast=False``)."""
        if runtime not in RUNTIMES:
            raise ValueError(f"runtime {runtime!r}: one of {', '.join(RUNTIMES)}")
        runtime = runtime if fast else "automaton"
        self.analysis = compile_query(query, schema, opt)
        check_selection(selection)
        self.selection = selection
        self.values_only = values_only
        self.program = Program(self.analysis)
        self.group = Group(self.analysis.partition)
        self.group.machine.add(self.program)
        # a fast path (plain path, flat sequence pattern), or why the automaton runs the query
        if runtime == "automaton":
            self.fast_path = "the fast path is off"
        else:
            self.fast_path = "the compiled automaton was asked for"
            if runtime != "compiled":
                self.fast_path = _chosen(compile_fast_path(self.analysis, selection), runtime)
            self.not_fast = self.fast_path if isinstance(self.fast_path, str) else None
            if isinstance(self.fast_path, str):  # the compiled automaton, where it takes it
                machine = self.group.machine
                found = compiled_plan(self.analysis, self.program, machine, selection, values_only)
                self.fast_path = found if isinstance(found, CompiledPlan) else self.fast_path
                self.not_compiled = None if isinstance(found, CompiledPlan) else found

    @property
    def vpa(self) -> Vpa:
        return self.program.vpa

    def stats(self) -> dict:
        """Automaton states and the transition cache's entries, hits and hit ratio; on the
        fast path, the lists (partitions) and partial matches of the last run."""
        if isinstance(self.fast_path, SequencePattern):
            return {"evaluator": "flat-sequence runtime", **self.fast_path.stats()}
        if isinstance(self.fast_path, PlainPath):
            return {"evaluator": "path runtime", **self.fast_path.stats()}
        if isinstance(self.fast_path, CompiledPlan):
            return {"evaluator": "compiled automaton", "states": len(self.vpa.states)}
        machine = self.group.machine
        return {
            "evaluator": "automaton",
            "states": len(self.vpa.states),
            "transition cache": machine.cache.stats(),
        }

    def explain(self) -> str:
        """The parsed query (variables, conditions, partition) and the automaton, as text."""
        analysis = self.analysis
        lines = [f"query: {' '.join(analysis.query.text.split())}", f"mode: {analysis.mode}"]
        for name in analysis.variables:
            group = analysis.kleene.get(name)
            where = f"under Kleene-* group {group}" if group is not None else "one node"
            lines.append(f"variable ${name}: {where}")
        for group, conjuncts in sorted(analysis.iteration.items()):
            for conjunct in conjuncts:
                text = A.to_text(conjunct.cond)
                lines.append(f"condition at every iteration of group {group}: {text}")
        for conjunct in analysis.per_match:
            lines.append(f"condition per match: {A.to_text(conjunct.cond)}")
        if analysis.partition is not None:
            path, attribute = analysis.partition
            lines.append(f"partition by: {A.to_text(path)}@{attribute}")
        lines.append(f"path run by the automaton: {A.to_text(analysis.path)}")
        if isinstance(self.fast_path, SequencePattern):
            lines.append("evaluated on the flat-sequence runtime (docs/xseq.md)")
        elif isinstance(self.fast_path, PlainPath):
            lines.append("evaluated on the path runtime (docs/xseq.md)")
        elif isinstance(self.fast_path, CompiledPlan):
            why = getattr(self, "not_fast", None)
            lines.append(
                "evaluated on the compiled automaton (docs/xseq.md"
                + (f"; not on a runtime: {why})" if why else ")")
            )
        else:
            why = getattr(self, "not_compiled", None)
            lines.append(
                f"evaluated on the pushdown automaton (not on a runtime: {self.fast_path}"
                + (f"; not compiled: {why})" if why else ")")
            )
        lines += ["", f"automaton ({len(self.vpa.states)} states):", self.vpa.describe()]
        return "\n".join(lines)

    @property
    def resumable(self) -> bool:
        """Whether ``start``/``resume`` serve this query: every runtime's run is saved."""
        return True

    def fingerprint(self) -> tuple:
        """What a saved run must have been made by: the query and the options."""
        path = A.to_text(self.analysis.path)  # as the optimizer left it
        kind = type(self.fast_path).__name__
        return (self.analysis.query.text, path, self.selection, self.values_only, kind)

    def start(self) -> XSeqRun:
        """A run fed batch by batch, whose state ``snapshot()`` saves (``xseq/runs.py``)."""
        if isinstance(self.fast_path, PlainPath):
            return XSeqRun(self, PlainPathRun(self.fast_path, self.values_only))
        if isinstance(self.fast_path, SequencePattern):
            run = SequenceRun(self.fast_path, self.values_only, self.selection)
            return XSeqRun(self, run)
        if isinstance(self.fast_path, CompiledPlan):
            return XSeqRun(self, CompiledRun(self.fast_path, self.values_only))
        return XSeqRun(self, AutomatonRun(self))

    def resume(self, data: bytes) -> XSeqRun:
        """The run that ``XSeqRun.snapshot()`` saved, going on where it stopped."""
        return load_run(self, data)

    def run(self, batches: Iterable[EventBatch], final: bool = True) -> Iterator[list]:
        """The output rows, each as soon as it is known (aggregates at the end).

        ``final=False``: the input is only a prefix of the stream; give the rows known
        after it and stop, without the rows that only the end of the stream decides
        (aggregates, matches a longer one might still replace). A later run over a longer
        prefix gives these rows again, first, in the same order.
        """
        if isinstance(self.fast_path, SequencePattern):
            return self.fast_path.run(batches, self.values_only, final, self.selection)
        if isinstance(self.fast_path, PlainPath):
            return PlainPathRun(self.fast_path, self.values_only).run(batches, final)
        if isinstance(self.fast_path, CompiledPlan):
            run = CompiledRun(self.fast_path, self.values_only)
            return drive(batches, run.feed, run.end, final)
        driver = AutomatonRun(self).driver
        return drive(batches, driver.feed, driver.finish, final)


class AutomatonRun:
    """The pushdown automaton as a runtime fed batch by batch (``XSeqRun``): its state —
    the machine (its lazily built transitions too), the runs of the open document or of
    every partition, the emitters' pending matches — is saved whole, by pickle."""

    def __init__(self, engine: XSeqEngine) -> None:
        rows: list = []
        active: dict = {}
        outputs = Outputs(active)
        outputs.emitters[0] = Emitter(
            engine.analysis, engine.selection, engine.values_only, rows.append
        )
        self.driver = Driver(engine.group.stream(outputs), active, rows)

    def feed(self, batch: EventBatch) -> list:
        return self.driver.feed(batch)

    def end(self, final: bool) -> list:
        return self.driver.finish(final)

    def state(self) -> Driver:
        return self.driver

    def restore(self, driver: Driver) -> None:
        self.driver = driver


class XSeqMultiEngine:
    """Many XSeq queries in one automaton, one pass: each row is ``[query id, *row]``.

    Queries with the same ``partition by`` (or none) share one union automaton
    (``xcep.xseq.machine``): common prefixes are shared, and queries that
    differ only in their per-match conditions and outputs (a template family:
    the same path and per-iteration conditions, other constants) share all of
    it, each checking its own conditions when a match completes. Queries can
    be subscribed and unsubscribed while a stream runs: a subscription takes
    effect at the next document of the stream (partitioned queries: from the
    next document on, in every partition), an unsubscription at once.

    >>> import io
    >>> from xcep.events import EventStream
    >>> engine = XSeqMultiEngine({"cheap": "//item[price < 10]/name/text()"})
    >>> engine.subscribe("names", "//person/name/text()")
    >>> item = b"<item><price>5</price><name>pen</name></item>"
    >>> data = io.BytesIO(b"<s>" + item + b"<person><name>Al</name></person></s>")
    >>> list(engine.run(EventStream([data]).batches()))
    [['cheap', 'pen'], ['names', 'Al']]
    """

    def __init__(
        self,
        queries=(),
        selection: str = "all",
        values_only: bool = False,
        schema=None,
        opt: str = "all",
        runtime: str = "auto",
    ) -> None:
        """``runtime``: ``auto`` (the compiled automaton where each template compiles and
        under every selection policy, else the Python automaton) or ``automaton``."""
        check_selection(selection)
        if runtime not in RUNTIMES:
            raise ValueError(f"runtime {runtime!r}: one of {', '.join(RUNTIMES)}")
        self.selection = selection
        self.values_only = values_only
        self.schema = schema
        self.opt = opt
        self.runtime = runtime
        self.not_compiled = None  # why the last start ran on the Python automaton
        self.groups: dict = {}  # partition key -> Group
        self.queries: dict = {}  # query id -> (group, owner, slot, analysis)
        # query id -> analysis of one subscribed while a stream ran and not in the machine:
        # waiting for the next document, or on a Python automaton of its own (it joins
        # the machine when the next stream starts)
        self.outside: dict = {}
        self._slots = 0
        self._live = None  # while a stream runs: its _Live
        for qid, query in dict(queries).items():
            self.subscribe(qid, query)

    def subscribe(self, qid, query) -> None:
        """Add a query under ``qid`` (a new id; the text, a parsed query or an analysis)."""
        if qid in self.queries:
            raise ValueError(f"query id {qid!r} is already subscribed")
        analysis = compile_query(query, self.schema, self.opt, lift=True)
        self.queries[qid] = None  # taken; in the machine now, or at the next document
        if self._live is None:
            self._add(qid, analysis)
        else:
            self.outside[qid] = analysis
            self._live.pending.append((qid, analysis))

    def unsubscribe(self, qid) -> None:
        """Remove a query: it reports nothing more, at once."""
        if qid not in self.queries:
            raise KeyError(f"no query {qid!r} is subscribed")
        entry = self.queries.pop(qid)
        if entry is None:  # subscribed while running, not in the machine (yet)
            del self.outside[qid]
            if self._live is not None:
                self._live.drop(qid)
            return
        group, owner, slot, _ = entry
        program = group.machine.programs[owner]
        program.leave(slot)
        if not program.members:
            group.machine.remove(owner)
            group.templates = {k: o for k, o in group.templates.items() if o != owner}
        if self._live is not None:
            self._live.forget(group, owner if not program.members else None, slot)

    def stats(self) -> dict:
        """Queries, templates and automaton states, per partition clause."""
        out = {}
        for key, group in self.groups.items():
            machine = group.machine
            owners = machine.owners()
            out["none" if key is None else f"{key[0]}@{key[1]}"] = {
                "queries": sum(len(machine.programs[o].members) for o in owners),
                "templates": len(owners),
                "states": machine.live_states(),
                "shared states": machine.shared_states(),
                "transition cache": machine.cache.stats(),
            }
        return out

    def _add(self, qid, analysis: Analysis, share: bool = True) -> tuple:
        key = partition_key(analysis)
        group = self.groups.get(key)
        if group is None:
            group = self.groups[key] = Group(analysis.partition)
        tkey = template_key(analysis)
        owner = group.templates.get(tkey) if share else None
        if owner is None:
            program = Program(replace(analysis, per_match=[]))
            program.members = {}
            owner = group.machine.add(program, share=share)
            if self.selection == "all":  # members' matches are selected alike: one queue
                program.shared_output = -1 - owner
            if share:
                group.templates[tkey] = owner
        slot = self._slots
        self._slots += 1
        group.machine.programs[owner].join(slot, analysis)
        self.queries[qid] = (group, owner, slot, analysis)
        self.outside.pop(qid, None)
        return group, owner, slot

    def start(self) -> Driver:
        """A run fed a batch at a time (``feed``, then ``finish``); the engine and the
        driver, pickled together, save it (``xcep.plans``)."""
        if self._live is not None:
            raise StateError("this engine is already running a stream")
        for qid, analysis in list(self.outside.items()):  # (subscribed during the last run)
            self._add(qid, analysis)
        rows: list = []
        self.not_compiled = "the Python automaton was asked for"
        if self.runtime != "automaton":
            try:
                driver = self._live = CompiledDriver(self, rows, _run_alone)
                self.not_compiled = None
                return driver
            except NotCompiled as why:
                self.not_compiled = str(why)
        live = self._live = _Live(self, rows)
        return Driver(live, live.active, rows)

    def run(self, batches: Iterable[EventBatch], final: bool = True) -> Iterator[list]:
        """The rows of every query, as ``[query id, *row]``, each as soon as it is known."""
        driver = self.start()
        try:
            yield from drive(batches, driver.feed, driver.finish, final)
        finally:
            self._live = None


class _Live:
    """The stream an ``XSeqMultiEngine`` runs: every group's stream, fed the same events;
    subscriptions made while it runs join at the next document."""

    def __init__(self, engine: XSeqMultiEngine, rows: list) -> None:
        self.engine = engine
        self.rows = rows
        self.active: dict = {}
        self.streams: dict = {}  # group -> its stream
        self.pending: list = []  # (query id, analysis) waiting for the next document
        self.doc = None
        self.stretches = False  # set by the driver (routing.Driver)
        for qid, entry in engine.queries.items():
            self._emitter(qid, *entry)

    def _emitter(self, qid, group: Group, owner: int, slot: int, analysis: Analysis) -> None:
        stream = self.streams.get(group)
        if stream is None:
            stream = self.streams[group] = group.stream(Outputs(self.active))
        engine = self.engine

        emitter = Emitter(
            analysis, engine.selection, engine.values_only, Tagged(self.rows, qid), owner
        )
        program = group.machine.programs[owner]
        if program.shared_output is None:
            stream.outputs.emitters[slot] = emitter
            return
        template = stream.outputs.emitters.get(program.shared_output)
        if template is None:
            template = TemplateEmitter(program, owner)
            stream.outputs.emitters[program.shared_output] = template
        template.join(slot, emitter)

    def drop(self, qid) -> None:
        """A query subscribed while running leaves before it joined."""
        self.pending = [(q, a) for q, a in self.pending if q != qid]

    def forget(self, group: Group, owner: int | None, slot: int) -> None:
        stream = self.streams.get(group)
        if stream is not None:
            stream.outputs.drop(slot)
            if owner is not None:
                for run in stream.runs():
                    run.forget(owner)

    def start_document(self, number) -> None:
        joined = []
        if number is not None and self.pending:
            pending, self.pending = self.pending, []
            for qid, analysis in pending:
                # partition runs outlive documents: a query joining them gets states of its
                # own, so that no partial match of the others carries over into it
                stream = self.streams.get(self.engine.groups.get(partition_key(analysis)))
                share = not (isinstance(stream, Stream) and stream.partitions)
                entry = self.engine._add(qid, analysis, share=share)
                self._emitter(qid, *entry, analysis)
                if not share:
                    joined.append((self.streams[entry[0]], entry[1]))
        for stream in self.streams.values():
            stream.stretches = self.stretches and len(self.streams) == 1
            stream.start_document(number)
        self.doc = number
        for stream, owner in joined:
            stream.joined(owner)
        if len(self.streams) == 1:  # one group: its events go straight to it
            (only,) = self.streams.values()
            self.open, self.text, self.close = only.open, only.text, only.close
        else:
            self.open, self.text, self.close = self._open_all, self._text_all, self._close_all

    def quiet_run(self):
        """The run whose quiet stretches the driver reads in C: one group's, without
        partition by (``_Documents.quiet_run``); None otherwise."""
        if len(self.streams) != 1:
            return None
        (only,) = self.streams.values()
        return only.quiet_run()

    def stretched(self, run, quiet, popped: int, opened: list) -> None:
        (only,) = self.streams.values()
        only.stretched(run, quiet, popped, opened)

    def _open_all(self, tag, attrs, ident, number) -> None:
        for stream in self.streams.values():
            stream.open(tag, attrs, ident, number)

    def _text_all(self, value, ident) -> None:
        for stream in self.streams.values():
            stream.text(value, ident)

    def _close_all(self) -> None:
        for stream in self.streams.values():
            stream.close()

    def finish(self) -> None:
        for stream in self.streams.values():
            stream.finish()


def _run_alone(analysis: Analysis, values_only: bool, selection: str):
    """A run of one query on a Python automaton of its own (``CompiledDriver``)."""
    engine = XSeqEngine(analysis, runtime="automaton", values_only=values_only, selection=selection)
    return engine.start()
