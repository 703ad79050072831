"""XSCL syntax: query blocks (tree patterns with variables), joins, SELECT and PUBLISH."""

from __future__ import annotations

from dataclasses import dataclass, field

CHILD, DESCENDANT, ATTRIBUTE = "/", "//", "@"
JOIN, FOLLOWED_BY = "JOIN", "FOLLOWED BY"


@dataclass
class Step:
    """One pattern node: how it is reached from its parent, its name test, its variable."""

    axis: str  # "/", "//" or "@"
    name: str  # element or attribute name, or "*"
    var: str | None = None
    predicates: list[list[Step]] = field(default_factory=list)  # relative paths
    pos: int = 0

    def text(self) -> str:
        axis = "/@" if self.axis == ATTRIBUTE else self.axis
        out = f"{axis}{self.name}"
        if self.var:
            out += f"->{self.var}"
        return out + "".join(f"[{path_text(p)}]" for p in self.predicates)


def path_text(steps: list[Step]) -> str:
    return "".join(step.text() for step in steps)


@dataclass
class Block:
    """An XPath query block over one stream: ``S//book->x1[//author->x2]``."""

    stream: str
    steps: list[Step]
    pos: int = 0

    def text(self) -> str:
        return self.stream + path_text(self.steps)

    @property
    def output(self) -> Step:
        """The node the block selects (the last step of its main path)."""
        return self.steps[-1]


@dataclass
class Operand:
    var: str
    steps: list[Step] = field(default_factory=list)  # a path from the variable
    pos: int = 0


@dataclass
class Equality:
    left: Operand
    right: Operand


@dataclass
class Query:
    id: str
    text: str
    left: Block
    op: str | None = None  # JOIN or FOLLOWED BY; None: one block (a filter)
    predicates: list[Equality] = field(default_factory=list)
    window: float = float("inf")
    right: Block | None = None
    select: list[str] | None = None  # None: SELECT *
    publish: str | None = None

    def blocks(self) -> list[Block]:
        return [self.left] if self.right is None else [self.left, self.right]


def walk_steps(steps: list[Step]):
    """Every step of a path and of its predicates, depth first."""
    for step in steps:
        yield step
        for predicate in step.predicates:
            yield from walk_steps(predicate)
