"""Pausing Python's cyclic garbage collector while large structures are built."""

from __future__ import annotations

import gc
from contextlib import contextmanager


@contextmanager
def collector_paused():
    """Pause the cyclic garbage collector: while a large structure (a tree, a workload's
    automaton) is built it would scan the growing heap again and again (a third of the
    building time). The collector's previous state is restored."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
