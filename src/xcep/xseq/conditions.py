"""The per-match conditions of a template's member queries, decided together.

Members of a template (queries with the same path and other constants) often
differ only in constants: ``$A/current/text() > 40``, ``… > 75``, ``… > 120``.
Checking each member's comparison on every match costs one comparison per
member. Here the comparisons of a variable reference with a constant are
indexed (``xcep.xseq.counting``, the same index a split uses for its targets'
attribute predicates): one match's values select the passing members. Other
conjuncts are checked per member.

The value expressions are the members' interned references, so ``values``
reads each once per match (``make_env(memo=True)``).
"""

from __future__ import annotations

from xcep.xseq.counting import CountingIndex, reference_atom
from xcep.xseq.evaluate import holds, values


class MemberConditions:
    """``decide(env)``: the slots of the members whose conditions hold on a match."""

    def __init__(self) -> None:
        self.members: dict = {}  # slot -> [conjunct]
        self._index = None

    def _ready(self) -> tuple:
        """(the members' slots, the counting index of their conditions, whether some are
        left to check one by one), made once."""
        if self._index is None:
            slots = list(self.members)
            index = CountingIndex(
                [[c.cond for c in self.members[s]] for s in slots], reference_atom
            )
            self._index = (slots, index, any(index.rest))
        return self._index

    def indexed(self) -> bool:
        """Whether every condition is decided by the index (none left to ``holds``)."""
        return not self._ready()[2]

    def references(self) -> list:
        """The references the index may read: those its conditions compare (every object,
        since the index keys them by identity)."""
        atoms = (reference_atom(c.cond) for conjuncts in self.members.values() for c in conjuncts)
        return [atom[0] for atom in atoms if atom is not None]

    def set(self, slot: int, conjuncts: list) -> None:
        if conjuncts:
            self.members[slot] = list(conjuncts)
        else:
            self.members.pop(slot, None)
        self._index = None

    def drop(self, slot: int) -> None:
        self.members.pop(slot, None)
        self._index = None

    def decide(self, env, read=None) -> set:
        """``read``: the values of a reference, read otherwise than through ``env`` (which
        may then be None, where ``indexed()``)."""
        slots, index, rest = self._ready()
        passing = index.passing(read or (lambda expr: values(expr, None, env)))
        if not rest:  # (usually: every condition is in the index)
            return set(map(slots.__getitem__, passing))
        return {
            slots[k]
            for k in passing
            if not index.rest[k] or all(holds(cond, None, env) for cond in index.rest[k])
        }
