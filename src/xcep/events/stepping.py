"""Driving a pass over event batches one batch at a time.

The engines read their input as an iterable of ``EventBatch``es and yield what they
find. To feed such a pass piecewise (a service, a Spark micro-batch, an engine
beside another) without a thread, the pass reads from a ``Feed`` that its driver
fills, and answers a ``None`` batch (a *pause*) with a ``None``: the driver then
knows that the batch before it is read to its end. ``Stepper`` is that driver.

A pass that cannot answer a pause (its reading is nested deep inside what it does:
an XQuery window asks for its next item in the middle of a condition) runs in a
thread of its own instead (``ThreadStepper``), fed through a queue: the caller's
thread waits whenever the pass runs, so the two never run at once and the results
are those of one pass.
"""

from __future__ import annotations

import queue
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator


class Feed:
    """An iterator over a deque that its driver fills: it ends when the deque is empty
    (so only once the driver gives no more)."""

    def __init__(self, items: deque) -> None:
        self.items = items

    def __iter__(self) -> Feed:
        return self

    def __next__(self):
        if not self.items:
            raise StopIteration
        return self.items.popleft()


class Stepper:
    """A pass ``make(batches)`` (an iterator over what it finds, answering a ``None``
    batch with a ``None``) fed a batch at a time: ``feed(batch)`` gives what it found
    once the batch is read, ``end()`` what it finds once the input ends."""

    def __init__(self, make: Callable[[Iterable], Iterator]) -> None:
        self.items: deque = deque()
        self.found = make(Feed(self.items))
        self.ended = False

    def feed(self, batch) -> list:
        if self.ended:
            raise ValueError("the pass has ended")
        self.items.extend((batch, None))
        out = []
        for item in self.found:
            if item is None:
                break
            out.append(item)
        return out

    def end(self) -> list:
        """What the pass finds once the input ends (it is then over)."""
        if self.ended:
            return []
        self.ended = True
        return list(self.found)


_WANTS, _DONE = object(), object()


class ThreadStepper:
    """``Stepper``'s interface for a pass that does not answer pauses: it runs in a
    thread of its own, which waits for the next batch whenever it wants one. What it
    finds is handed over in one piece when it waits (each item on its own would wake the
    caller's thread once per item)."""

    def __init__(self, make: Callable[[Iterable], Iterator]) -> None:
        self.inbox: queue.Queue = queue.Queue()
        self.outbox: queue.Queue = queue.Queue()
        self.found: list = []  # what the pass found since it last waited (its thread's)
        self.ended = False
        self.thread = threading.Thread(target=self._pass, args=(make,), daemon=True)
        self.thread.start()
        self._collect()  # until the pass wants its first batch

    def _batches(self) -> Iterator:
        while True:
            found, self.found = self.found, []
            self.outbox.put((_WANTS, found))  # the caller may go on: this thread waits
            batch = self.inbox.get()
            if batch is _DONE:
                return
            yield batch

    def _pass(self, make) -> None:
        try:
            for item in make(self._batches()):
                self.found.append(item)
        except BaseException as exc:  # handed to the caller's thread
            self.outbox.put((_DONE, self.found, exc))
            return
        self.outbox.put((_DONE, self.found, None))

    def _collect(self) -> list:
        signal, found, *error = self.outbox.get()
        if signal is _DONE:
            self.ended = True
            if error[0] is not None:
                raise error[0]
        return found

    def feed(self, batch) -> list:
        if self.ended:
            raise ValueError("the pass has ended")
        self.inbox.put(batch)
        return self._collect()

    def end(self) -> list:
        if self.ended:
            return []
        self.inbox.put(_DONE)
        out = self._collect()
        self.thread.join()
        return out
