"""Driving a pass over event batches one batch at a time.

The engines read their input as an iterable of ``EventBatch``es and yield what they
find. To feed such a pass piecewise (a service, a Spark micro-batch, an engine
beside another) without a thread, the pass reads from a ``Feed`` that its driver
fills, and answers a ``None`` batch (a *pause*) with a ``None``: the driver then
knows that the batch before it is read to its end. ``Stepper`` is that driver.
"""

from __future__ import annotations

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
