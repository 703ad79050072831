"""XSeq runs that are fed a batch at a time, saved as bytes and resumed.

``engine.start()`` gives an ``XSeqRun``: ``feed(batches)`` returns the rows
known once they are read, ``finish()`` the rows only the end of the stream
decides (aggregates), and ``snapshot()`` the whole run state as bytes, which
``engine.resume(data)`` — in this process or another, with an engine of the
same query and options — turns back into a run that goes on where it stopped.
A snapshot holds what the runtime keeps (the states of the open elements, the
partial matches, pending rows, aggregates), never the input read so far, so its
size depends on depth and live matches, not on the stream's length.

Every runtime's runs are: the path runtime's (``paths.py``), the flat-sequence
runtime's (``sequence.py``), the compiled automaton's (``vm.py``: its C run's state as
plain objects) and the pushdown automaton's (pickled whole).
"""

from __future__ import annotations

import pickle
from collections.abc import Iterable

from xcep.errors import StateError

VERSION = 6  # 6: the compiled run's captured events carry their node ids
# 5: a captured subtree keeps only what is read (Frame.keep); 4: flat-sequence
# runs keep their list reader apart (3: path runs of several queries; 2: flat-sequence policies)
MAGIC = b"xcep-xseq-run"


class XSeqRun:
    """One pass of an engine's query, fed batch by batch; ``snapshot()`` saves it."""

    def __init__(self, engine, runtime) -> None:
        self.engine = engine
        self.runtime = runtime  # a PlainPathRun, SequenceRun, CompiledRun or AutomatonRun
        self.finished = False

    def feed(self, batches: Iterable) -> list[list]:
        """The rows known once ``batches`` (the stream's next events) are read."""
        if self.finished:
            raise StateError("this run is finished: start or resume another")
        rows: list = []
        for batch in batches:
            rows += self.runtime.feed(batch)
        return rows

    def finish(self) -> list[list]:
        """The stream ended: the rows only its end decides (aggregates, counts)."""
        if self.finished:
            return []
        self.finished = True
        return self.runtime.end(final=True)

    def snapshot(self) -> bytes:
        """The run state as bytes (versioned; restored by ``engine.resume``)."""
        if self.finished:
            raise StateError("this run is finished: nothing is left to save")
        state = {
            "version": VERSION,
            "plan": self.engine.fingerprint(),
            "runtime": type(self.runtime).__name__,
            "state": self.runtime.state(),
        }
        return MAGIC + pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)


def load(engine, data: bytes) -> XSeqRun:
    """The run that ``data`` (from ``XSeqRun.snapshot``) saved, on ``engine``."""
    if not isinstance(data, bytes | bytearray) or not data.startswith(MAGIC):
        raise StateError("not an XSeq run snapshot")
    try:
        state = pickle.loads(data[len(MAGIC) :])
    except Exception as exc:  # a truncated or damaged snapshot
        raise StateError(f"a damaged XSeq run snapshot ({type(exc).__name__})") from None
    if state.get("version") != VERSION:
        raise StateError(f"an XSeq run snapshot of version {state.get('version')}, not {VERSION}")
    if state.get("plan") != engine.fingerprint():
        raise StateError("the snapshot was saved by another query or other options")
    run = engine.start()
    if type(run.runtime).__name__ != state["runtime"]:
        raise StateError(f"the snapshot is of a {state['runtime']}, this engine runs otherwise")
    run.runtime.restore(state["state"])
    return run
