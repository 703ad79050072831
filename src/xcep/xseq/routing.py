"""How events reach the XSeq automaton's runs: the ``Driver`` feeds each batch's events
(between two batches it holds a run's whole state: a saved run), a ``Group`` holds the
queries of one ``partition by`` (one machine), and its stream hands each document to a
run of its own (``_Documents``) or each partition's elements to the partition's run
(``Stream``, ``partition by``)."""

from __future__ import annotations

from collections.abc import Iterable
from itertools import islice

from xcep.events import ATTR, OPEN, TEXT, EventBatch
from xcep.xseq import ast as A
from xcep.xseq.automaton import MAYBE_QUIET, SKIPPING, Run
from xcep.xseq.dom import ROOT, Node
from xcep.xseq.emitters import Outputs, pump
from xcep.xseq.machine import SHARED, Machine
from xcep.xseq.program import Program, single_machine
from xcep.xseq.semantics import Analysis, analyze

try:
    from xcep.xseq._quiet import stretch
except ImportError:  # built without a C compiler: Python reads every event
    stretch = None


class Driver:
    """Feeds the events of each batch to ``stream`` (a ``_Documents``, ``Stream`` or
    ``_Live``) and gives the rows known after it. Between two batches it holds the
    automaton's whole state (the stream's runs, the emitters, an open tag whose
    attributes go on in the next batch), and pickles: a saved run."""

    stretches = False  # (a run saved before stretches were read in C reads every event)
    SHORT = 12  # events: a stretch of fewer costs more than Python reading them

    def __init__(self, stream, active: dict, rows: list) -> None:
        self.stream = stream
        self.active = active  # emitters with queued entries
        self.rows = rows  # the rows the emitters give, taken out after each batch
        self.tag = self.attrs = self.opened = None  # an open tag waiting for its attributes
        # the stream's run reads its quiet stretches in C (``quiet_run``: which one, if any)
        self.stretches = stretch is not None
        stream.stretches = self.stretches
        self._wanted: dict = {}  # (names, symbols known) -> their ids as a bytes mask
        self._short: dict = {}  # element name -> its short stretches in a row

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_wanted": {}, "_short": {}}

    def feed(self, batch: EventBatch) -> list:
        stream, active = self.stream, self.active
        tag, attrs, opened = self.tag, self.attrs, self.opened
        open_ = getattr(stream, "open", None)
        text, close = getattr(stream, "text", None), getattr(stream, "close", None)
        attr, opening, texts = int(ATTR), int(OPEN), int(TEXT)  # plain ints compare faster
        names = batch.symbols.names
        # (the kernel reads the columns as the event sources make them: arrays B and i)
        stretches = self.stretches and _columns_as_made(batch)
        for number, start, end in batch.document_runs():
            if tag is not None:  # the open tag's attributes ended with its document
                open_(tag, attrs, opened, stream.doc)
                tag = None
            if number != stream.doc:
                stream.start_document(number)
                open_, text, close = stream.open, stream.text, stream.close
            whole = start == 0 and end == len(batch.kinds)
            columns = (batch.kinds, batch.names, batch.values, batch.nodes)
            if not whole:
                columns = tuple(column[start:end] for column in columns)
            kinds = iter(columns[0])  # where it stands is the event's position (stretches)
            events = zip(kinds, *columns[1:], strict=False)  # equal lengths
            for kind, name, value, ident in events:
                if kind == attr:
                    attrs.append((names[name], value, ident))
                    continue
                if tag is not None:
                    quiet = open_(tag, attrs, opened, number)
                    if quiet is not None and stretches and self._worth(tag):
                        i = kinds.__reduce__()[2] - 1  # this event's position
                        stop = self._stretch(quiet, batch, columns, i, number, tag)
                        if stop > i:  # event i and those up to stop were read there
                            tag = None
                            next(islice(events, stop - i - 1, stop - i - 1), None)
                            continue
                    tag = None
                if kind == opening:
                    tag, attrs, opened = names[name], [], ident
                elif kind == texts:
                    text(value, ident)
                else:
                    quiet = close()
                    if active:
                        pump(active)
                    if quiet is not None and stretches and self._worth(None):
                        i = kinds.__reduce__()[2] - 1
                        stop = self._stretch(quiet, batch, columns, i + 1, number, None)
                        next(islice(events, stop - i - 1, stop - i - 1), None)
        self.tag, self.attrs, self.opened = tag, attrs, opened
        return self._taken()

    def _worth(self, tag) -> bool:
        """Whether to read a stretch in C. One of a few events costs more than Python
        reading them (the call and the stack's bookkeeping: about a dozen events' worth).
        Stretches are counted by the element whose content they begin in (``tag``; None
        after a close): once two in a row were shorter than ``SHORT``, that element's
        are left to Python, but for one in 64 (the document may change)."""
        short = self._short.get(tag, 0)
        if short >= 2 and short % 64:
            self._short[tag] = short + 1
            return False
        return True

    def _stretch(self, quiet, batch: EventBatch, columns: tuple, start: int, number, tag) -> int:
        """Read the quiet stretch from ``start`` in C (``xcep.xseq._quiet``) and put what
        it leaves on the run's stack; the position of the next event to read."""
        run = self.stream.quiet_run()
        if run is None:
            return start
        short = self._short.get(tag, 0)
        if quiet is MAYBE_QUIET:
            quiet = run.quiet()
            if quiet is None:  # no stretch here: as short as can be (after an open)
                if tag is not None:
                    self._shorter(tag, short)
                return start
        kinds, ids, values, nodes = columns
        if quiet is SKIPPING:
            masks, pops = (None, None, None), run.skip - 1
        else:
            masks, pops = self._wanted_ids(quiet, batch.symbols), max(run.light_top() - 1, 0)
        stop, popped, positions = stretch(kinds, ids, start, len(kinds), pops, *masks)
        if stop - start < self.SHORT:
            self._shorter(tag, short)
        elif short:
            del self._short[tag]
        if stop == start:
            return stop
        names, attr = batch.symbols.names, int(ATTR)
        opened = []
        for at in positions:  # the elements still open: their tags and attributes
            attrs, k = [], at + 1
            while kinds[k] == attr:
                attrs.append((names[ids[k]], values[k], nodes[k]))
                k += 1
            opened.append((names[ids[at]], attrs, nodes[at], number))
        self.stream.stretched(run, quiet, popped, opened)
        return stop

    def _shorter(self, tag, short: int) -> None:
        if len(self._short) >= 4096:
            self._short.clear()
        self._short[tag] = short + 1

    def _wanted_ids(self, quiet: tuple, symbols) -> tuple:
        """``quiet``'s (names, attributes, child names) as masks over the name ids the
        stream knows so far (None for none; a name the stream does not know yet gets an
        id past a mask's end: C reads it as wanted)."""
        key = (quiet, len(symbols.names))
        masks = self._wanted.get(key)
        if masks is None:
            if len(self._wanted) >= 1024:
                self._wanted.clear()
            names, attributes, children = quiet
            masks = self._wanted[key] = (
                _mask(names, symbols),
                _mask(attributes, symbols) if attributes else None,
                _mask(children, symbols) if children else None,
            )
        return masks

    def finish(self, final: bool = True) -> list:
        """The stream ended (``final``) or stops here (a prefix of it): the rest."""
        if self.tag is not None:
            self.stream.open(self.tag, self.attrs, self.opened, self.stream.doc)
            self.tag = None
        if final:
            self.stream.start_document(None)
            self.stream.finish()
        return self._taken()

    def _taken(self) -> list:
        out = self.rows[:]
        self.rows.clear()
        return out


def _columns_as_made(batch: EventBatch) -> bool:
    kinds, names = batch.kinds, batch.names
    return getattr(kinds, "typecode", None) == "B" and getattr(names, "typecode", None) == "i"


def _mask(names, symbols) -> bytes:
    mask = bytearray(len(symbols.names))
    for name in names:
        ident = symbols.get(name)
        if ident is not None:
            mask[ident] = 1
    return bytes(mask)


def drive(batches: Iterable[EventBatch], feed, finish, final: bool):
    """Feed ``batches`` to a run (its ``feed``, then its ``finish(final)``); yield the rows
    as they are known."""
    for batch in batches:
        if batch is None:  # a pause (xcep.events.stepping): what is known is out
            yield None
            continue
        yield from feed(batch)
    yield from finish(final)


class Group:
    """Queries with the same ``partition by`` (or none): one machine, one pass."""

    def __init__(self, partition) -> None:
        self.partition = partition  # (element path, attribute) or None
        self.machine = Machine()
        self.templates: dict = {}  # template key -> owner in the machine
        self.router = None
        if partition is not None:
            element_path, self.attribute = partition
            route = analyze(A.Query(element_path, None, None, None, ""))
            self.router = single_machine(Program(route, router=True))

    def stream(self, outputs: Outputs):
        return Stream(self, outputs) if self.router is not None else _Documents(self, outputs)


def partition_key(analysis: Analysis):
    partition = analysis.partition
    return None if partition is None else (A.to_text(partition[0]), partition[1])


class _Documents:
    """Hands the events of each document to a run of its own (no partition by)."""

    stretches = False  # whether its runs say where quiet stretches begin (``Run.quiet``)

    def __init__(self, group: Group, outputs: Outputs) -> None:
        self.group = group
        self.outputs = outputs
        self.run: Run | None = None
        self.doc = None

    def start_document(self, number) -> None:
        """A new document begins (``None``: the stream ended); drop what a broken one left."""
        if self.run is not None and (len(self.run.frames) > 1 or self.run.skip):
            self.outputs.abandon(self.run)  # its root never closed: the document was malformed
        self.doc = number
        self.run = None
        if number is not None:
            self.run = Run(self.group.machine, self.outputs, Node(ROOT, None, number, -1))
            self.run.stretches = self.stretches
            self.open, self.text, self.close = self.run.open, self.run.text, self.run.close

    def runs(self) -> list:
        return [self.run] if self.run is not None else []

    def quiet_run(self) -> Run | None:
        """The run whose quiet stretches the driver reads in C."""
        return self.run

    def stretched(self, run: Run, quiet, popped: int, opened: list) -> None:
        run.stretched(quiet, popped, opened)

    def finish(self) -> None:
        self.outputs.finish(None)


class Stream:
    """Routes the events of the stream to the runs: one per partition (partition by)."""

    stretches = False  # whether the router says where quiet stretches begin (outside the
    # partitioned elements, where only it reads the events)

    def __init__(self, group: Group, outputs: Outputs) -> None:
        self.group = group
        self.outputs = outputs
        self.partitions: dict = {}
        self.hits: list = []
        self.routing: list = []  # (depth, run) of the partitioned elements open now
        self.router: Run | None = None  # finds the partitioned elements (partition by)
        self.doc = None
        self.depth = 0  # of the open elements: not 0 at a document change if it was malformed

    def start_document(self, number) -> None:
        """A new document begins (``None``: the stream ended); drop what a broken one left."""
        if self.depth:
            for _, target in reversed(self.routing):
                while len(target.frames) > 1 or target.skip:
                    target.close()
                if target.suspended:
                    target.resume()
        self.routing.clear()
        self.doc, self.depth = number, 0
        if number is None:
            return
        self.router = Run(self.group.router, _Collector(self.hits), Node(ROOT, None, number, -1))
        self.router.stretches = self.stretches

    def joined(self, owner: int) -> None:
        """A query was added between documents: it starts at every partition's root."""
        machine = self.group.machine.ready()
        starts = [s for s in machine.start if machine.states[s].owner == owner]
        for run in self.partitions.values():
            run.frames[0]._chains = None
            run.closure([(s, SHARED, (), 0) for s in starts], run.frames[0], None, run.root)
            run.flush_matches()

    def runs(self) -> list:
        return list(self.partitions.values())

    def finish(self) -> None:
        self.outputs.finish(list(self.partitions))

    def quiet_run(self) -> Run | None:
        """Outside the partitioned elements, the router: it alone reads the events."""
        return None if self.routing else self.router

    def stretched(self, run: Run, quiet, popped: int, opened: list) -> None:
        run.stretched(quiet, popped, opened)
        self.depth += len(opened) - popped

    def open(self, tag, attrs, ident, number):
        self.depth += 1
        quiet = self.router.open(tag, attrs, ident, number)
        if self.hits:
            self.hits.clear()
            attribute = self.group.attribute
            key = next((v for n, v, _ in attrs if n == attribute), None)
            if key is not None:
                target = self.partitions.get(key)
                if target is None:
                    root = Node(ROOT, None, -1, -1)
                    target = Run(self.group.machine, self.outputs, root, key)
                    self.partitions[key] = target
                if len(target.frames) > 1 or target.skip:
                    target.suspend()
                self.routing.append((self.depth, target))
        if self.routing:
            self.routing[-1][1].open(tag, attrs, ident, number)
            return None
        return quiet

    def text(self, value, ident) -> None:
        if self.routing:
            self.routing[-1][1].text(value, ident)

    def close(self):
        quiet = self.router.close()
        if self.routing:
            self.routing[-1][1].close()
            if self.routing[-1][0] == self.depth:
                _, target = self.routing.pop()
                if target.suspended:
                    target.resume()
        self.depth -= 1
        return None if self.routing else quiet


class _Collector:
    """The outputs of the partition router: it only notes that a partitioned element opened."""

    def __init__(self, hits: list) -> None:
        self.hits = hits

    def add(self, run: Run, slot: int, matches: list) -> None:
        self.hits.extend(matches)
