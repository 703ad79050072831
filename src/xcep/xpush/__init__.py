"""XPush: many boolean XPath filters, one lazily built deterministic pushdown machine.

Seed: Gupta, Suciu, SIGMOD 2003. The machine reads the nested-word event
stream of ``xcep.events``. (Being built: issue 5.)
"""
