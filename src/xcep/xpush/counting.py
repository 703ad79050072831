"""Filters whose values are counted, not determinized (issue 20: the counting design).

A subscription is mostly a path of names to one element — the *anchor* — and a
boolean of value tests below it: ``/person[profile/age < 18 and name = 'Jaques
Kading']``, ``/item[(quantity > 1.10 or quantity < 0.90) and not(location =
'Tuvalu')]/name``. In the lazy machine every combination of such tests that a
document makes true is a state of its own, and with each user's own constants
those combinations do not repeat: states are built on every document. Here
they are never states. A filter of this form is a ``Plan``:

- its *head*, the element names from the document node to the anchor;
- its *atoms*, each a path of names below the anchor (element names, then an
  optional ``@name`` or ``text()``; none for the anchor itself) and a test of
  the nodes it reaches: an atomic ``Predicate``, or existence;
- its *formula*, the boolean of its atoms (postfix code), the path after the
  anchor's predicate joined as one more existence atom (``/a[p]/b`` is
  ``/a[p and b]``).

An atom holds for an anchor when some node at its path holds the test (what
the machine reads: existential, ``starts-with`` and ``contains`` too), and the
filter matches a document when its formula holds for some anchor.

``CountedFilters`` compiles a workload's plans into a trie of the paths from
the document node (one node per path of names: a document's element has at
most one), each node with its existence atoms and a ``PredicateIndex`` of
its value atoms; an atom lists the filters it appears in. Running a document
(``CountingRun``, and ``Counter`` in ``_states.c``, its compiled twin) follows
the trie down the open elements, tests each value once against its node's
index (string values of elements only where an index wants them), and marks
the atoms that hold for the anchor open at their head. A filter whose atom was
marked is *touched*; when an anchor closes, the formulas of its touched
filters are evaluated. A formula that holds with every atom false (``not(…)``)
holds for an anchor that touched it nowhere: such a filter matches a document
unless it was false at every anchor of its head. The work per document is the
values tested and the atoms and filters they reach, never the number of
filters (the counting algorithm of Siena and Gryphon, with BE-Tree's value
indexes; Sadoghi & Jacobsen, SIGMOD 2011). Predicates on more than one step of the
path (``/a[P]/b[Q]/c``) are nested anchors: the inner anchor's plan is a filter of its
own, never answered, that makes an atom of the outer one's true where it holds
(``plan_of``, ``SUB``). Filters of any other form (``//``, ``*``, predicates inside a
path, ``..``, functions over whole documents) are the machine's.
"""

from __future__ import annotations

from array import array
from itertools import accumulate, chain, compress

from xcep.events.model import ATTR, CLOSE, OPEN, TEXT
from xcep.xpush.counted_plans import SUB, TEXT_LABEL, Template, evaluate
from xcep.xpush.predicates import Predicate, PredicateIndex

try:
    from xcep.xpush._states import Counter, plan_counted
except ImportError:  # built without a C compiler: ``CountingRun`` does it
    Counter = plan_counted = None

# in C the formula's operators (counted_plans: TRUE … OR) are numbered 0-4 (-1 - op) and
# the atoms follow them
_C_OPS = 5
# how often a test of each kind may hold on a document, roughly (existence: 1), to find
# filters by their rarest atoms (``CountedFilters.access``)
_OP_COST = {
    "=": 0.01,
    "starts-with": 0.05,
    "contains": 0.1,
    "<": 0.3,
    "<=": 0.3,
    ">": 0.3,
    ">=": 0.3,
    "!=": 0.9,
}
# the tests by their codes in ``_states.plan_counted`` (0: existence, the last: SUB)
_TESTS = (None, *_OP_COST, SUB)


def offsets(lists) -> tuple[array, array]:
    """Lists of ints as flat int32 arrays: offsets (one more than lists) and items (what
    the compiled core takes for lists: ``Counter``, ``StateKernel``)."""
    return array("i", accumulate(map(len, lists), initial=0)), array("i", chain(*lists))


def _with_inner(templates: list, constants: list, names: list) -> tuple[list, list, list, dict]:
    """Filters as columns (templates, constants, names) with the inner filters of those
    whose template has an inner anchor (``plan_of``) after them, one per (inner template,
    constants, names): the key that is the constant of the outer one's SUB atom, which
    follows its constants; and {key: its inner filter's number}. The filters with an
    inner anchor are found by their templates (a few among a million filters), not by a
    look at each filter in Python."""
    outer = {template for template in set(templates) if template.inner is not None}
    if not outer:
        return templates, constants, names, {}
    templates, constants, names, inner = list(templates), list(constants), list(names), {}
    todo = list(compress(range(len(templates)), map(outer.__contains__, templates)))
    for k in todo:  # (an inner filter may have one of its own: it joins the list)
        template = templates[k]
        key = (template.inner, constants[k], names[k])
        if key not in inner:
            inner[key] = len(templates)
            if template.inner.inner is not None:
                todo.append(len(templates))
            templates.append(template.inner)
            constants.append(constants[k])
            names.append(names[k])
        constants[k] = (*constants[k], key)
    return templates, constants, names, inner


class CountedFilters:
    """Plans compiled into one trie (the module's docstring); filters by their rank among
    all of a machine's filters, numbered here in ascending rank order. A filter is given
    as its shape's ``Template``, its constants and its names (three columns, by rank: no
    object per filter): the trie's nodes are found once per template and names, and only
    the constants are a filter's own."""

    def __init__(
        self,
        ranks: list[int] | array,
        templates: list[Template],
        constants: list[tuple],
        names: list[tuple],
        compiled: bool = True,
    ) -> None:
        self.labels: dict[str, int] = {TEXT_LABEL: 0}
        self.ranks = array("i", ranks)  # ascending
        self.arguments = None  # what Counter is built from, where planned in C
        *columns, self._inner = _with_inner(templates, constants, names)
        if compiled and plan_counted is not None:
            self._plan_in_c(*columns)
        if self.arguments is None:
            self._plan_in_python(*columns)

    @classmethod
    def of(cls, planned: dict[int, tuple[Template, tuple, tuple]], compiled: bool = True):
        """The counted filters of {rank: (template, constants, names)}."""
        ranks = sorted(planned)
        columns = [list(column) for column in zip(*map(planned.get, ranks), strict=True)]
        return cls(ranks, *(columns or ([], [], [])), compiled=compiled)

    def _marks(self, subs, constants, distinct: int) -> array | None:
        """Per (distinct) filter, the answered ones then the inner ones, the SUB atom it
        makes true where it holds (-1: none, it is answered), from the SUB atoms (``subs``,
        their numbers); None without inner filters."""
        if not self._inner:
            return None
        marks = array("i", [-1]) * distinct
        shift = distinct - len(self._inner) - len(self.ranks)  # an inner one's given number
        for atom in subs:  # (a SUB atom's constant is its inner filter's key)
            marks[self._inner[constants[atom]] + shift] = atom
        return marks

    def _rank_lists(self, at, items) -> tuple[array, array]:
        """The ranks each answered (distinct) filter counts for, as (offsets, items), from
        ``plan_counted``'s ``groups`` (offsets, and the ranks of the answered ones' filters
        then the inner ones' numbers)."""
        at = array("i", at)
        at = at[: len(at) - len(self._inner)]  # (the inner ones follow the answered ones)
        return at, array("i", items)[: at[-1]]

    def _plan_in_python(self, templates: list, constants: list, names: list) -> None:
        """The trie, its heads and slots (``_shape`` per template and names), then each
        filter's atoms (``_plan``): the reference of ``_states.plan_counted``."""
        self.children: dict[tuple[int, int], int] = {}  # (node, label) → node
        self.head_of: list[int] = [-1]  # node → its head number, or -1 (node 0: the document)
        self.is_element: list[bool] = [True]
        self.exists: list[list[int]] = [[]]  # node → atoms that hold where it is
        self.values: list[dict[int, Predicate]] = [{}]  # node → its value atoms
        self.heads: list[int] = []  # head number → its node
        self.atom_head: list[int] = []
        self.ops: list[str | None] = []  # atom → its test's operator (None: existence)
        # an atom's test without its constant: (anchor, node, op) → slot, and per slot
        # its atoms by constant (one dict lookup of the constant per atom of a filter)
        self._slot_of: dict[tuple, int] = {}
        self._nodes: dict[tuple, int] = {}  # (node, labels) → the node they lead to
        self._slots: list[tuple[dict, int, int, str | None]] = []  # (atoms, head, node, op)
        # what the filters of one template with one set of names share, numbered
        shape_of: dict[tuple, int] = {}
        self._shapes: list[tuple] = []  # (head, slots as (slot, place), formula, default, choices)
        filter_shapes = []
        self.constants: list = []  # atom → its constant
        for template, named in zip(templates, names, strict=True):
            shape = shape_of.get((template, named))
            if shape is None:
                shape = shape_of[(template, named)] = len(self._shapes)
                self._shapes.append(self._shape(template, named))
            filter_shapes.append(shape)
        self._plan(filter_shapes, constants)
        subs = [atom for atom, op in enumerate(self.ops) if op == SUB]
        self.marks = self._marks(subs, self.constants, len(self.groups))
        self.indexes = [PredicateIndex(values) if values else None for values in self.values]

    def _shape(self, template: Template, names: tuple) -> tuple:
        plan = template.named(names)
        anchor = self._node(0, plan.head)
        head = self._head(anchor)
        slots = []
        nodes = self._nodes
        for (labels, op, _), place in zip(plan.atoms, template.places, strict=True):
            node = nodes.get((anchor, labels))
            if node is None:
                node = nodes[(anchor, labels)] = self._node(anchor, labels)
            key = (anchor, node, op)
            slot = self._slot_of.get(key)
            if slot is None:
                slot = self._slot_of[key] = len(self._slots)
                self._slots.append(({}, head, key[1], op))
            slots.append((slot, place))
        return head, tuple(slots), plan.formula, template.default, template.choices

    def _plan(self, filter_shapes, constants: list) -> None:
        """Each filter's atoms; equal answered filters (one template and names, the same
        atoms) made one, counted once (``groups``: each one's filters, the distinct ones
        numbered by their first, then each inner one); each one's formula and the atoms it
        is found by (``access``)."""
        self.codes: list[tuple[int, ...]] = []  # filter → its formula over atom numbers
        self.defaults: list[bool] = []  # filter → whether it holds with no atom true
        self.head_defaults: list[list[int]] = [[] for _ in self.heads]
        self.groups: list[list[int]] = []  # filter → the filters given it counts for
        found_by = []  # filter → (its atoms, the sets of them it may be found by)
        slots, equal = self._slots, {}
        for f, (shape, values) in enumerate(zip(filter_shapes, constants, strict=True)):
            head, places, formula, default, choices = self._shapes[shape]
            numbers = []
            for slot, place in places:
                value = None if place < 0 else values[place]
                atom = slots[slot][0].get(value)
                numbers.append(self._atom(slot, value) if atom is None else atom)
            if f < len(self.ranks):  # (an inner filter is distinct already)
                key = (shape, *numbers)
                if key in equal:
                    self.groups[equal[key]].append(f)
                    continue
                equal[key] = len(self.groups)
            self.groups.append([f])
            self.codes.append(tuple(op if op < 0 else numbers[op] for op in formula))
            self.defaults.append(default)
            if default:
                self.head_defaults[head].append(len(self.groups) - 1)
            found_by.append((numbers, choices))
        uses = [0] * len(self.atom_head)  # atom → the (distinct) filters it appears in
        for numbers, _ in found_by:
            for atom in numbers:  # (a filter's atoms are distinct)
                uses[atom] += 1
        # how likely an atom is to hold, roughly: its test's kind, the filters sharing it
        self.costs = [
            _OP_COST.get(op, 1.0) * (1 + n / 100) for op, n in zip(self.ops, uses, strict=True)
        ]
        self.postings: list[list[int]] = [[] for _ in self.atom_head]  # atom → its filters
        for f, (numbers, choices) in enumerate(found_by):
            for atom in self.access(numbers, choices):
                self.postings[atom].append(f)

    def _plan_in_c(self, templates: list, constants: list, names: list) -> None:
        """``_plan_in_python`` done by ``_states.plan_counted`` (the trie too, each template
        read once), into the arguments of ``Counter`` (``arguments``); a template that
        names what its names do not (none does: ``Template``) has them planned in Python."""
        costs = array("d", (_OP_COST.get(test, 1.0) for test in _TESTS))
        try:
            out = plan_counted(
                templates,
                constants,
                names,
                self.ranks,
                self.labels,
                _TESTS,
                costs,
                _TESTS.index(SUB),
            )
        except ValueError:
            self.labels = {TEXT_LABEL: 0}
            return
        children, head_of, is_element, atom_head, atom_ops, constants, exists, values = out[:8]
        postings, code, defaults, head_defaults, groups = out[8:]
        subs = compress(range(len(atom_ops)), map(_TESTS.index(SUB).__eq__, atom_ops))
        marks = self._marks(subs, constants, len(defaults))
        values_at, value_atoms = array("i", values[0]), array("i", values[1])
        indexes = [None] * (len(values_at) - 1)
        for node in range(len(indexes)):
            if values_at[node] < values_at[node + 1]:
                at = value_atoms[values_at[node] : values_at[node + 1]]
                indexes[node] = PredicateIndex.of_tests(
                    at,
                    map(_TESTS.__getitem__, map(atom_ops.__getitem__, at)),
                    map(constants.__getitem__, at),
                )
        self.arguments = dict(
            children=children,
            head_of=head_of,
            collect=bytes(
                index is not None and element
                for index, element in zip(indexes, is_element, strict=True)
            ),
            exists=exists,
            atom_head=atom_head,
            postings=postings,
            code=code,
            defaults=defaults,
            head_defaults=head_defaults,
            ranks=self._rank_lists(*groups),
            marks=marks,
        )
        self.atom_count = len(atom_ops)
        self.indexes = indexes

    def _atom(self, slot: int, value) -> int:
        """A new atom: the test of ``slot`` with the constant ``value``."""
        atoms, head, node, op = self._slots[slot]
        atom = atoms[value] = len(self.atom_head)
        self.atom_head.append(head)
        self.ops.append(op)
        self.constants.append(value)
        if op is None:
            self.exists[node].append(atom)
        elif op != SUB:  # (a SUB atom is made true by its inner filter)
            self.values[node][atom] = Predicate(op, value)
        return atom

    def access(self, numbers: list[int], choices) -> list[int]:
        """The atoms a filter is found by: of the sets of atoms its formula holds only if
        one of holds (``Template.choices``, over the filter's atoms ``numbers``), the one
        likeliest to be rare; else (``not(…)``) all of its atoms, any of which may change
        its value. So a filter is touched by the atoms of its own values (a user's id or
        name), not by every document with a common value (``business = 'Yes'``, the path
        after the predicate)."""
        if not choices:
            return numbers
        costs = self.costs
        if len(choices) == 1:
            chosen = choices[0]
        else:
            chosen = min(choices, key=lambda choice: sum(costs[numbers[k]] for k in choice))
        return [numbers[k] for k in chosen]

    def _head(self, anchor: int) -> int:
        head = self.head_of[anchor]
        if head < 0:
            head = self.head_of[anchor] = len(self.heads)
            self.heads.append(anchor)
        return head

    def _node(self, node: int, labels) -> int:
        for label in labels:
            if not self.is_element[node]:  # below an attribute or a text: nothing
                raise ValueError("a path below an attribute or text")
            label_id = self.labels.setdefault(label, len(self.labels))
            child = self.children.get((node, label_id))
            if child is None:
                child = self.children[(node, label_id)] = len(self.head_of)
                self.head_of.append(-1)
                self.is_element.append(label[0] != "@" and label != TEXT_LABEL)
                self.exists.append([])
                self.values.append({})
            node = child
        return node

    def __len__(self) -> int:
        return len(self.ranks)

    def release(self) -> None:
        """Drop what the compiled ``Counter`` holds copies of (a million filters' plans
        are hundreds of MB): only the labels and the ranks stay."""
        for name in (
            "codes",
            "postings",
            "exists",
            "values",
            "indexes",
            "_slots",
            "costs",
            "ops",
            "atom_head",
            "defaults",
            "head_defaults",
            "children",
            "head_of",
            "arguments",
            "_slot_of",
            "_nodes",
            "_shapes",
            "constants",
            "marks",
            "groups",
        ):
            setattr(self, name, None)

    def counter(self):
        """The compiled run (``_states.Counter``), or None when the core is not built."""
        return None if Counter is None else Counter(**self.counter_arguments())

    def counter_arguments(self) -> dict:
        """What ``_states.Counter`` is built from: these tables as flat int32 arrays."""
        if self.arguments is not None:  # planned in C
            return dict(
                self.arguments,
                indexes=[None if i is None else i.compiled(self.atom_count) for i in self.indexes],
            )
        atoms = len(self.atom_head)
        # in C the operators follow the atoms: TRUE → atoms, FALSE → atoms + 1, …
        codes = [[op if op >= 0 else atoms - 1 - op for op in code] for code in self.codes]
        keys = array("i")
        for (node, label), child in self.children.items():
            keys.extend((node, label, child))
        return dict(
            children=keys,
            head_of=array("i", self.head_of),
            collect=bytes(bool(v) and e for v, e in zip(self.values, self.is_element, strict=True)),
            exists=offsets(self.exists),
            indexes=[None if index is None else index.compiled(atoms) for index in self.indexes],
            atom_head=array("i", self.atom_head),
            postings=offsets(self.postings),
            code=offsets(codes),
            defaults=bytes(self.defaults),
            head_defaults=offsets(self.head_defaults),
            ranks=self._rank_lists(*offsets(self._groups_by_rank())),
            marks=self.marks,
        )

    def _groups_by_rank(self) -> list[list[int]]:
        """``groups`` as ``plan_counted`` gives them: an answered filter by its rank, an
        inner one by its number."""
        ranks, answered = self.ranks, len(self.ranks)
        return [[ranks[f] if f < answered else f for f in group] for group in self.groups]

    def label_ids(self, labels) -> array:
        """The trie's ids of machine labels (-1 for a label no filter names)."""
        get = self.labels.get
        return array("i", [get(label, -1) for label in labels])


class CountingRun:
    """The counted filters over a stream's batches, in Python: the reference of
    ``Counter.feed`` (the same steps; the module's docstring)."""

    def __init__(self, counted: CountedFilters) -> None:
        self.c = counted
        self.doc = None
        self._start_document(None)

    def _start_document(self, doc) -> None:
        self.doc = doc
        self.stack: list[tuple[int, int]] = []  # (node or -1, where its text starts)
        self.texts: list[str] = []
        self.collecting = 0
        self.instance: dict[int, int] = {}  # head → its open anchor's number
        self.true: set[tuple[int, int]] = set()  # (atom, anchor number)
        self.touched: dict[int, dict] = {}  # head → filters touched at its open anchor
        self.seen: dict[int, int] = {}  # head → its anchors in the document
        self.false: dict[int, int] = {}  # default filter → the anchors where it was false
        self.matched: set[int] = set()
        self.anchors = 0

    def feed(self, batch, start: int, end: int) -> list[tuple[int, tuple[int, ...]]]:
        """(doc, the ranks of its counted filters that match, ascending) for each document
        that completes in ``batch``'s events ``start:end``."""
        out = []
        c = self.c
        names = batch.symbols.names
        columns = (batch.docs, batch.kinds, batch.names, batch.values)
        for doc, kind, name, value in zip(*(column[start:end] for column in columns), strict=True):
            if doc != self.doc:  # a new document (what was left of one is dropped)
                self._start_document(doc)
            node = self.stack[-1][0] if self.stack else 0
            if kind == OPEN:
                child = self._child(node, names[name])
                self.stack.append((child, len(self.texts)))
                if child >= 0:
                    head = c.head_of[child]
                    if head >= 0:
                        self.anchors += 1
                        self.instance[head] = self.anchors
                        self.touched[head] = {}
                        self.seen[head] = self.seen.get(head, 0) + 1
                    self._mark(c.exists[child])
                    if c.values[child]:
                        self.collecting += 1
            elif kind == CLOSE:
                node, start = self.stack.pop()
                if node >= 0:
                    if c.values[node]:
                        self._test(node, "".join(self.texts[start:]))
                        self.collecting -= 1
                        if not self.collecting:
                            self.texts.clear()
                    if c.head_of[node] >= 0:
                        self._close_anchor(c.head_of[node])
                if not self.stack:
                    out.append((doc, self._answer()))
                    self._start_document(None)
            else:
                if kind == TEXT and self.collecting:
                    self.texts.append(value)
                label = "@" + names[name] if kind == ATTR else TEXT_LABEL
                leaf = self._child(node, label)
                if leaf >= 0:
                    self._mark(c.exists[leaf])
                    if c.values[leaf] and value is not None:
                        self._test(leaf, value)
        return out

    def _child(self, node: int, label: str) -> int:
        if node < 0:
            return -1
        label_id = self.c.labels.get(label)
        return -1 if label_id is None else self.c.children.get((node, label_id), -1)

    def _test(self, node: int, value: str) -> None:
        self._mark(sorted(self.c.indexes[node].true_states(value)))

    def _mark(self, atoms) -> None:
        c = self.c
        for atom in atoms:
            head = c.atom_head[atom]
            key = (atom, self.instance[head])
            if key in self.true:
                continue
            self.true.add(key)
            self.touched[head].update(dict.fromkeys(c.postings[atom]))

    def _close_anchor(self, head: int) -> None:
        c, anchor = self.c, self.instance[head]
        for f in self.touched[head]:
            if not evaluate(c.codes[f], lambda atom: (atom, anchor) in self.true):
                if c.defaults[f]:
                    self.false[f] = self.false.get(f, 0) + 1
            elif c.marks is not None and c.marks[f] >= 0:  # an inner filter: its SUB atom
                self._mark((c.marks[f],))  # holds for the outer anchor open now
            else:
                self.matched.add(f)

    def _answer(self) -> tuple[int, ...]:
        c = self.c
        found = set(self.matched)
        for head, anchors in self.seen.items():
            found.update(f for f in c.head_defaults[head] if self.false.get(f, 0) < anchors)
        return tuple(sorted(c.ranks[given] for f in found for given in c.groups[f]))


class Labels:
    """A stream's labels by symbol id — ``elements`` (the names) and ``attributes`` (``@``
    and the name) — and their ids in a compiled table's label space (``label_ids``, as
    int32 arrays): what the compiled walks read names by (the machine's ``StateKernel``,
    the ``Counter``). Extended as the symbol table grows; made afresh for a new one."""

    def __init__(self, label_ids=None) -> None:
        self.label_ids = label_ids
        self.symbols = None
        self.elements: list[str] = []
        self.attributes: list[str] = []
        self.element_ids = self.attribute_ids = array("i")

    def read(self, symbols) -> None:
        """Know every name of ``symbols`` (a batch's symbol table)."""
        if symbols is not self.symbols:
            self.symbols = symbols
            self.elements, self.attributes = [], []
            self.element_ids, self.attribute_ids = array("i"), array("i")
        names = symbols.names
        if len(self.elements) < len(names):
            new = names[len(self.elements) :]
            self.elements.extend(new)
            self.attributes.extend("@" + name for name in new)
        if self.label_ids is not None and len(self.element_ids) < len(self.elements):
            self.element_ids.extend(self.label_ids(self.elements[len(self.element_ids) :]))
            self.attribute_ids.extend(self.label_ids(self.attributes[len(self.attribute_ids) :]))

    def relabel(self, label_ids) -> None:
        """The ids in another label space (None: none; a table built anew)."""
        self.label_ids = label_ids
        self.element_ids = array("i", label_ids(self.elements) if label_ids else ())
        self.attribute_ids = array("i", label_ids(self.attributes) if label_ids else ())


class Counting:
    """The counted filters run beside the machine, over the events it reads: compiled
    (``Counter``) or in Python (``CountingRun``)."""

    def __init__(self, counted: CountedFilters, compiled: bool = True) -> None:
        self.counted = counted
        self.counter = counted.counter() if compiled else None
        self.run = CountingRun(counted) if self.counter is None else None
        if self.counter is not None:  # it holds its own copies: the Python ones can go
            counted.release()
        self.labels = Labels(counted.label_ids)

    def reset(self) -> None:
        """Forget the document begun (the next event starts one)."""
        if self.counter is None:
            self.run._start_document(None)
        else:
            self.counter.reset()

    def feed(self, batch, start: int, end: int) -> list:
        """(doc, ranks ascending: int32 bytes when compiled, else a tuple) for each
        document completed in the events ``start:end`` of ``batch``."""
        if self.counter is None:
            return self.run.feed(batch, start, end)
        labels = self.labels
        labels.read(batch.symbols)
        return self.counter.feed(
            batch.docs, batch.kinds, batch.names, batch.values,
            labels.element_ids, labels.attribute_ids, start, end,
        )  # fmt: skip
