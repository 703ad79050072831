"""Compile an XSeq path to a visibly pushdown automaton (seed §4.1).

One construction per axis, closed under concatenation, union and Kleene-*.
The automaton reads the nested word: an open tag (with its attributes) is a
call, a close tag a return, text an internal symbol. Its states are

- ``wait`` states, the E states of the seed: a run waits in one frame of the
  stack (the children of the current node, ``frame='child'``, or its
  siblings, ``frame='sibling'``) for the next open tag (``mode='next'``: the
  immediately following one, the ``\\`` and ``/\\`` axes), any open tag of
  the frame (``'any'``: ``/`` and the sibling axis), any open tag in the
  frame or below (``'desc'``: ``//``) or a text child (``'text'``,
  ``'dtext'``). Skipping a subtree is the push/pop of the frame: a waiting
  run is on the stack while the subtree is read.
- ``match`` states, the O states: the node test, the predicates and the
  variable binding of a step; ``attr`` states read the attributes of the
  open tag (the A states);
- ``enter``/``iter`` states around a Kleene-* body (the ε-edges back to
  its start), where per-iteration conditions are checked;
- ``split`` (ε) and ``accept``.

Backward axes are not steps of the automaton: they are supported in
predicates, where they look at the stack of open ancestors.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xcep.xseq import ast as A
from xcep.xseq.parser import QuerySyntaxError
from xcep.xseq.rewrite import without_backward_steps
from xcep.xseq.semantics import Analysis, check_streamable, check_streamable_clauses

_WAITS = {
    A.CHILD: ("any", "child"),
    A.FIRST_CHILD: ("next", "child"),
    A.DESCENDANT: ("desc", "child"),
    A.FOLLOWING_SIBLING: ("any", "sibling"),
    A.NEXT_SIBLING: ("next", "sibling"),
}


@dataclass
class State:
    id: int
    kind: str  # wait, match, attr, enter, iter, split, accept
    next: list = field(default_factory=list)
    step: A.Step | None = None
    mode: str | None = None  # wait: any, next, desc, text, dtext
    frame: str | None = None  # wait: child or sibling
    group: int | None = None
    test_here: bool = False  # match: the node test is checked here (self steps)
    owner: int | None = 0  # the query's slot in a union automaton (None: shared)

    def label(self) -> str:
        step = self.step
        test = ""
        if step is not None:
            test = f"${step.var}" if step.var else ("text()" if step.kind == A.TEXT else step.name)
            test += "[…]" * len(step.preds)
        if self.kind == "wait":
            return f"E{self.id} wait {self.mode} {self.frame} {test}"
        if self.kind == "match":
            return f"O{self.id} {test}"
        if self.kind == "attr":
            return f"A{self.id} @{step.name}"
        if self.kind in ("enter", "iter"):
            return f"{self.kind}{self.id} group {self.group}"
        return f"{self.kind}{self.id}"


@dataclass
class Vpa:
    states: list
    start: list

    def describe(self) -> str:
        lines = [f"start: {', '.join(self.states[s].label() for s in self.start)}"]
        for state in self.states:
            targets = ", ".join(self.states[t].label() for t in state.next)
            edge = {"wait": "on open", "match": "ε"}.get(state.kind, "ε")
            if state.kind == "wait" and state.mode in ("text", "dtext"):
                edge = "on text"
            lines.append(f"{state.label()}  --{edge}-->  {targets or '-'}")
        return "\n".join(lines)

    def dot(self) -> str:
        lines = ["digraph xseq {", "  rankdir=LR;", "  node [shape=circle, fontsize=10];"]
        for state in self.states:
            shape = "doublecircle" if state.kind == "accept" else "circle"
            label = state.label().replace('"', "'")
            lines.append(f'  s{state.id} [label="{label}", shape={shape}];')
        lines.append("  start [shape=point]; " + " ".join(f"start -> s{s};" for s in self.start))
        for state in self.states:
            edge = "open" if state.kind == "wait" else "ε"
            for target in state.next:
                lines.append(f'  s{state.id} -> s{target} [label="{edge}"];')
        lines.append("}")
        return "\n".join(lines)


def compile_to_vpa(analysis: Analysis, path=None) -> Vpa:
    """The automaton of ``path`` (default: the analysis' path) followed by acceptance."""
    states: list[State] = []
    text = analysis.query.text
    if path is None:
        check_streamable_clauses(analysis.query)

    def new(kind: str, **fields) -> State:
        state = State(len(states), kind, **fields)
        states.append(state)
        return state

    def build(item, follow: list) -> list:
        """Entry states of ``item`` whose runs continue at ``follow``."""
        if isinstance(item, A.Step):
            return step(item, follow)
        if isinstance(item, A.Seq):
            for part in reversed(item.items):
                follow = build(part, follow)
            return follow
        if isinstance(item, A.Union):
            return [s for part in item.items for s in build(part, follow)]
        if isinstance(item, A.Star):
            enter = new("enter", group=item.group)
            again = new("iter", group=item.group)
            body = build(item.body, [again.id])
            enter.next = body + follow
            again.next = body + follow
            return [enter.id]
        if isinstance(item, A.Intersect):
            # each operand runs from the same context node; a join state passes a run on
            # when every operand reached the same node from that context (same event)
            enter = new("ienter", group=item.group)
            for branch, operand in enumerate(item.items):
                join = new("join", next=follow, group=item.group, mode=str(branch))
                enter.next += build(operand, [join.id])
            return [enter.id]
        raise TypeError(item)

    def step(item: A.Step, follow: list) -> list:
        if item.axis in A.BACKWARD_AXES:
            raise QuerySyntaxError(
                f"the {item.axis} axis is supported in predicates only, not as a step of the "
                "from path",
                text,
                item.pos,
            )
        for pred in item.preds:
            check_streamable(pred, text)
        if item.axis == A.ATTRIBUTE:
            return [new("attr", next=follow, step=item).id]
        match = new("match", next=follow, step=item)
        if item.axis == A.SELF:
            match.test_here = True
            return [match.id]
        if item.axis == A.DESCENDANT_OR_SELF:
            self_match = new("match", next=follow, step=item, test_here=True)
            return [self_match.id, *step(A.Step(A.DESCENDANT, *_rest(item)), follow)]
        if item.kind == A.TEXT:
            if item.axis not in (A.CHILD, A.DESCENDANT):
                raise QuerySyntaxError("text() needs the / or // axis", text, item.pos)
            mode = "text" if item.axis == A.CHILD else "dtext"
            return [new("wait", next=[match.id], step=item, mode=mode, frame="child").id]
        mode, frame = _WAITS[item.axis]
        return [new("wait", next=[match.id], step=item, mode=mode, frame=frame).id]

    accept = new("accept")
    path = without_backward_steps(path if path is not None else analysis.path, text)
    return Vpa(states, build(path, [accept.id]))


def _rest(step: A.Step) -> tuple:
    return (step.kind, step.name, step.preds, step.var, step.pos)
