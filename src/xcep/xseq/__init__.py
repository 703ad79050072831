"""XSeq: XPath with Kleene-* and sequence patterns, compiled to visibly pushdown automata.

Seed: Mozafari, Zeng, Zaniolo, SIGMOD 2012. The engine reads the nested-word
event stream of ``xcep.events``. (Being built: issues 3 and 4.)
"""
