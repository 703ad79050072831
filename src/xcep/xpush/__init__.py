"""XPush: many boolean XPath filters, one lazily built deterministic pushdown machine.

Seed: Gupta, Suciu, "Stream Processing of XPath Queries with Predicates",
SIGMOD 2003. Filters (``parser``) are rewritten (``rewrite``), compiled to
alternating automata (``afa``) with a shared atomic-predicate index
(``predicates``) and run by the lazy ``XPushMachine`` (``machine``) over the
nested-word events of ``xcep.events``. See docs/xpush.md.
"""

from xcep.idlines import FilterError
from xcep.xpush.machine import MachineOptions, MachineStats, XPushMachine
from xcep.xpush.parser import FilterSyntaxError, parse_filter
from xcep.xpush.workload import Workload

__all__ = [
    "FilterError",
    "FilterSyntaxError",
    "MachineOptions",
    "MachineStats",
    "Workload",
    "XPushMachine",
    "parse_filter",
]
