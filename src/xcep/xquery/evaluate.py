"""Evaluate a parsed query: a FLWOR's clauses turn a stream of tuples into tuples.

A tuple is a dict from variable name to value (a lone item or a list).
XPath parts run in elementpath with the tuple as their variables; the
window clause follows the XQuery 3.1 specification (§3.12.4); the pattern
clause runs the NFA of ``xcep.xquery.pattern``.
"""

from __future__ import annotations

import locale
import re
import xml.etree.ElementTree as ET

from elementpath import XPathContext, collations
from elementpath.exceptions import ElementPathError
from elementpath.tree_builders import get_node_tree
from elementpath.xpath_nodes import CommentNode, ElementNode, TextNode

from xcep.xquery import ast as A
from xcep.xquery.errors import XQueryError, position
from xcep.xquery.fastpath import Fallback, compile_atoms, compile_fast, item_column, root_path
from xcep.xquery.pattern import NFA, compile_pattern, find_instances, new_progress
from xcep.xquery.streaming import LazyItems, LazyMasks, reads_focus
from xcep.xquery.values import (
    as_sequence,
    as_value,
    atomize,
    check_type,
    ebv,
    element_of,
    group_key,
    is_node,
    matches_sequence_type,
    order_key,
    single_atom,
    string_value,
    type_test,
)


def _release_collation_lock_on_error() -> None:
    """Two faults of elementpath's ``CollationManager.__enter__``: it remembers the
    collation locale with ``locale.getlocale``, which can name a locale that
    cannot be set back (``C.UTF-8`` reads as ``en_US.UTF-8``, often not installed,
    as after Saxon has set the process locale); and when it raises, it keeps its
    module-wide lock, so every later collation in the process waits forever.
    Remember the exact setting instead, and release the lock on an error."""
    manager = collations.CollationManager
    enter = manager.__enter__
    if getattr(enter, "guarded", False):
        return

    def guarded_enter(self):
        current = locale.setlocale(locale.LC_COLLATE)  # the exact setting, to set back
        try:
            result = enter(self)
        except BaseException:
            if getattr(self, "_current_lc_collate", None) is not None:
                self._current_lc_collate = None
                collations._locale_collate_lock.release()
            raise
        if self._current_lc_collate is not None:
            self._current_lc_collate = current
        return result

    guarded_enter.guarded = True
    manager.__enter__ = guarded_enter


_release_collation_lock_on_error()


class Evaluator:
    """Evaluates expressions of one query text against one context (document or none)."""

    def __init__(self, text: str, context_root=None) -> None:
        self.text = text
        if context_root is not None:
            self.ctx = XPathContext(context_root)
            self.item = self.ctx.root
        else:  # no context item: an expression that reads it is XPDY0002 (``xpath``)
            self.ctx = XPathContext(ET.ElementTree(ET.Element("_")))
            self.ctx.root = self.ctx.document = None
            self.item = None
        self._nfas: dict[int, NFA] = {}
        self.inner = False  # evaluating a part of an expression ahead of it (placeholders)

    # -- expressions ---------------------------------------------------------

    def eval(self, expr: A.Expr, env: dict) -> list:
        return EXPRESSIONS[type(expr)](self, expr, env)

    def flwor(self, expr: A.FLWOR, env: dict) -> list:
        out: list = []
        for t in self.tuples(expr.clauses, env):
            out.extend(self.eval(expr.result, t))
        return out

    def sequence(self, expr: A.Sequence, env: dict) -> list:
        return [item for part in expr.items for item in self.eval(part, env)]

    def element(self, expr: A.Element, env: dict) -> list:
        return [self.construct(expr, env)]

    def prolog_body(self, expr: A.Prolog, env: dict) -> list:
        return self.eval(expr.body, self.prolog(expr, env))

    def external(self, expr: A.External, env: dict) -> list:
        if expr.name in env:
            value = env[expr.name]
            return list(value) if isinstance(value, list) else [value]
        if expr.default is not None:
            return self.eval(expr.default, env)
        raise XQueryError(f"no value for the external variable ${expr.name}", "XPDY0002")

    def prolog(self, prolog: A.Prolog, env: dict) -> dict:
        """The variables with the prolog's bound, in order; its functions run on this
        evaluator."""
        prolog.runtime["evaluator"] = self
        env = prolog.runtime["globals"] = dict(env)
        for name, value, declared in prolog.variables:
            items = self.eval(value, env)
            check_type(items, declared, f"${name}")
            env[name] = as_value(items)
        return env

    def xpath(self, expr: A.XPath, env: dict) -> list:
        if self.item is None and not self.inner:
            if expr.focus is None:
                expr.focus = reads_focus(expr.token)
            if expr.focus:
                line, column = position(self.text, expr.pos)
                raise XQueryError(
                    "the expression reads the context item, and there is none (a query "
                    "without input, or a function body)",
                    "XPDY0002",
                    line,
                    column,
                )
        if expr.placeholders:
            env = dict(env)
            # a FLWOR or constructor inside the expression, evaluated first: where it
            # stands (after a '/', in a predicate) its focus is not the query's, so the
            # missing context item is not checked inside it
            inner, self.inner = self.inner, True
            try:
                for name, sub in expr.placeholders:
                    env[name] = as_value(self.eval(sub, env))
            finally:
                self.inner = inner
        fast = _fast(expr)
        if fast:
            try:
                return fast(env)
            except Fallback:
                pass
        elif self.item is not None and self.item.node_kind == "document":
            if expr.from_root is None:
                expr.from_root = root_path(expr.token) or False
            if expr.from_root:
                return expr.from_root(self.item)
        return self._elementpath(expr, env)

    def _elementpath(self, expr: A.XPath, env: dict) -> list:
        ctx = self.ctx
        # a declared function called inside this expression evaluates its body on the same
        # context: what this evaluation set is put back after it (then its variables)
        saved = ctx.variables, ctx.item, ctx.position, ctx.size, ctx.axis
        ctx.variables = env
        ctx.item = self.item
        ctx.position = ctx.size = 1
        ctx.axis = None
        try:
            return as_sequence(expr.token.evaluate(ctx))
        except ElementPathError as exc:
            raise self._error(exc, expr.pos) from None
        except locale.Error as exc:  # a collation this machine has no locale for
            line, column = position(self.text, expr.pos)
            raise XQueryError(f"unsupported collation: {exc}", "FOCH0002", line, column) from None
        except (TypeError, ValueError, ArithmeticError) as exc:
            raise self._error(exc, expr.pos) from None
        finally:
            ctx.variables, ctx.item, ctx.position, ctx.size, ctx.axis = saved

    def _error(self, exc: Exception, offset: int) -> XQueryError:
        code = getattr(exc, "code", None)
        code = code.split(":")[-1] if code else None
        message = getattr(exc, "message", None) or str(exc)
        message = re.sub(r"^\[err:\w+\]\s*", "", message)
        line, column = position(self.text, offset)
        return XQueryError(message, code, line, column)

    def atoms(self, expr: A.Expr, env: dict) -> list:
        """``expr``'s items where only their string values count (an attribute value
        template): through the atomizing fast path when there is one."""
        if isinstance(expr, A.XPath) and not expr.placeholders:
            if expr.atoms is None:
                expr.atoms = compile_atoms(expr.token) or False
            if expr.atoms:
                try:
                    return expr.atoms(env)
                except Fallback:
                    pass
        return self.eval(expr, env)

    def condition(self, expr: A.Expr):
        """A function env -> sequence for ``expr``: its fast path when it has one."""
        if isinstance(expr, A.XPath) and not expr.placeholders:
            fast = _fast(expr)
            if fast:

                def run(env):
                    try:
                        return fast(env)
                    except Fallback:
                        return self._elementpath(expr, env)

                return run
        return lambda env: self.eval(expr, env)

    def first_result(self, expr: A.Expr, env: dict) -> list:
        """A FLWOR's first tuple's result; any other expression's whole value."""
        if isinstance(expr, A.FLWOR):
            for t in self.tuples(expr.clauses, env):
                return self.eval(expr.result, t)
            return []
        return self.eval(expr, env)

    def construct(self, expr: A.Element, env: dict):
        elem = self.build(expr, env)
        return get_node_tree(elem)

    def build(self, expr: A.Element, env: dict) -> ET.Element:
        elem = ET.Element(expr.name)
        for name, parts in expr.attributes:
            value = "".join(
                part
                if isinstance(part, str)
                else " ".join(map(string_value, self.atoms(part, env)))
                for part in parts
            )
            elem.set(name, value)
        for part in expr.content:
            if isinstance(part, str):
                _append_text(elem, part)
            elif isinstance(part, A.Element):
                elem.append(self.build(part, env))
            else:
                self._append_items(elem, self.eval(part, env))
        return elem

    def conditional(self, expr: A.If, env: dict) -> list:
        branch = expr.then if ebv(self.eval(expr.condition, env)) else expr.otherwise
        return self.eval(branch, env)

    def typeswitch(self, expr: A.Typeswitch, env: dict) -> list:
        """The first case whose sequence type the operand's value matches, else default."""
        value = self.eval(expr.operand, env)
        for var, types, result in expr.cases:
            if any(matches_sequence_type(value, declared) for declared in types):
                return self.eval(result, {**env, var: as_value(value)} if var else env)
        var = expr.default_var
        return self.eval(expr.default, {**env, var: as_value(value)} if var else env)

    def computed(self, expr: A.Computed, env: dict) -> list:
        """A computed constructor's node (``text {()}``: none)."""
        items = self.eval(expr.content, env) if expr.content is not None else []
        if expr.kind in ("text", "comment"):
            if expr.kind == "text" and not items:
                return []
            content = " ".join(string_value(atom) for atom in self._atomized(items))
            return [TextNode(content) if expr.kind == "text" else CommentNode(content)]
        if expr.kind == "document":
            elements = [item for item in items if is_node(item) and item.node_kind == "element"]
            if len(elements) != 1 or len(elements) != len(items):
                raise XQueryError("a document node here holds one element", "XPTY0004")
            return [get_node_tree(ET.ElementTree(element_of(elements[0])))]
        name = expr.name
        if not isinstance(name, str):
            names = self._atomized(self.eval(name, env))
            if len(names) != 1:
                raise XQueryError("a computed name must be one atomic value", "XPTY0004")
            name = string_value(names[0])
        if expr.kind == "attribute":
            value = " ".join(string_value(atom) for atom in self._atomized(items))
            holder = get_node_tree(ET.Element("_", {name: value}))
            return [next(iter(holder.attributes))]
        elem = ET.Element(name)
        self._append_items(elem, items)
        return [get_node_tree(elem)]

    def _atomized(self, items: list) -> list:
        """Nodes as their string values, atomic values as they are."""
        return [item.string_value if is_node(item) else item for item in items]

    def _append_items(self, elem: ET.Element, items: list) -> None:
        atoms: list[str] = []
        for item in items:
            if not is_node(item):
                atoms.append(string_value(item))
                continue
            if atoms:
                _append_text(elem, " ".join(atoms))
                atoms = []
            kind = item.node_kind
            if kind == "element":
                elem.append(element_of(item))
            elif kind == "attribute":
                elem.set(item.name, item.string_value)
            elif kind == "document":
                self._append_items(elem, list(item.children))
            elif kind == "text":
                _append_text(elem, item.string_value)
        if atoms:
            _append_text(elem, " ".join(atoms))

    # -- the tuple stream ------------------------------------------------------

    def tuples(self, clauses: list, env: dict):
        stream = [env]
        for clause in clauses:
            stream = self.clause(clause, stream)
        return stream

    def clause(self, clause, stream: list[dict]) -> list[dict]:
        return CLAUSES[type(clause)](self, clause, stream)

    def for_clause(self, clause: A.For, stream: list[dict]) -> list[dict]:
        out = []
        for t in stream:
            items = self.eval(clause.expr, t)
            for i, item in enumerate(items, 1):
                check_type([item], clause.type, f"${clause.var}")
                u = {**t, clause.var: item}
                if clause.position:
                    u[clause.position] = i
                out.append(u)
            if not items and clause.allowing_empty:  # one tuple, with () bound
                u = {**t, clause.var: as_value([])}
                if clause.position:
                    u[clause.position] = 0
                out.append(u)
        return out

    def let_clause(self, clause: A.Let, stream: list[dict]) -> list[dict]:
        out = []
        for t in stream:
            value = self.eval(clause.expr, t)
            check_type(value, clause.type, f"${clause.var}")
            out.append({**t, clause.var: as_value(value)})
        return out

    def where_clause(self, clause: A.Where, stream: list[dict]) -> list[dict]:
        return [t for t in stream if ebv(self.eval(clause.expr, t))]

    def count_clause(self, clause: A.Count, stream: list[dict]) -> list[dict]:
        return [{**t, clause.var: i} for i, t in enumerate(stream, 1)]

    def window_clause(self, clause: A.Window, stream: list[dict]) -> list[dict]:
        return [u for t in stream for u in self.window(clause, t)]

    def pattern_clause(self, clause: A.Pattern, stream: list[dict]) -> list[dict]:
        return [u for t in stream for u in self.pattern(clause, t)]

    def group_by(self, clause: A.GroupBy, stream: list[dict]) -> list[dict]:
        """XQuery 3.1 §3.12.7: ``$k := E`` specs are let bindings made first, in order;
        then tuples with equal keys merge and the other variables concatenate.  An
        anonymous key (the seed's ``group by $a/user``) binds no variable."""
        groups: dict[tuple, list] = {}
        for t in stream:
            t = dict(t)
            for spec in clause.specs:
                if spec.var and spec.expr is not None:
                    value = self.eval(spec.expr, t)
                    if spec.type is not None:  # the key is atomized, then checked (§3.12.7)
                        value = atomize(value)
                    check_type(value, spec.type, f"${spec.var}")
                    t[spec.var] = as_value(value)
            atoms = []
            for spec in clause.specs:
                value = as_sequence(t.get(spec.var)) if spec.var else self.eval(spec.expr, t)
                atoms.append(single_atom(value, "a grouping key"))
            key = tuple(group_key(a) for a in atoms)
            groups.setdefault(key, [atoms, []])[1].append(t)
        out = []
        keys = {spec.var for spec in clause.specs if spec.var}
        for atoms, members in groups.values():
            u = {}
            for name in members[0]:
                if name not in keys:
                    u[name] = as_value([i for m in members for i in as_sequence(m.get(name))])
            for spec, atom in zip(clause.specs, atoms, strict=True):
                if spec.var:
                    u[spec.var] = [] if atom is None else atom
            out.append(u)
        return out

    def order_by(self, clause: A.OrderBy, stream: list[dict]) -> list[dict]:
        keyed = [
            ([single_atom(self.eval(s.expr, t), "an order by key") for s in clause.specs], t)
            for t in stream
        ]
        flags = [(s.descending, s.empty_greatest) for s in clause.specs]
        key = order_key(flags)
        keyed.sort(key=lambda pair: key(pair[0]))
        return [t for _, t in keyed]

    # -- the window clause (XQuery 3.1 §3.12.4) ---------------------------------

    def window(self, clause: A.Window, env: dict, items: LazyItems | None = None):
        """The window clause's tuples over its items (``items``: read from a stream,
        else its expression's value), read only as far as its conditions look, and the
        items no window can reach any more forgotten."""
        if items is None:
            items = LazyItems(iter(self.eval(clause.expr, env)))

        def bind(cond: A.WindowCondition | None, base: dict, i: int) -> dict:
            return bind_into(cond, dict(base), i)

        def bind_into(cond: A.WindowCondition | None, t: dict, i: int) -> dict:
            if cond is None:
                return t
            if cond.current:
                t[cond.current] = items[i]
            if cond.position:
                t[cond.position] = i + 1
            if cond.previous:
                t[cond.previous] = items[i - 1] if i > 0 else []
            if cond.next:
                t[cond.next] = items[i + 1] if items.has(i + 1) else []
            return t

        start_when = self.condition(clause.start.when)
        end_when = self.condition(clause.end.when) if clause.end is not None else None

        def starts(i: int) -> dict | None:
            t = bind(clause.start, env, i)
            return t if ebv(start_when(t)) else None

        def find_end(s: int, t: dict) -> tuple[int, dict | None]:
            e, u = s, dict(t)
            while items.has(e):
                bind_into(clause.end, u, e)  # (the same variables each time: one dict)
                if ebv(end_when(u)):
                    return e, u
                e += 1
            return e - 1, None

        def emit(t: dict, s: int, e: int) -> dict:
            t = dict(t)
            t[clause.var] = items.slice(s, e + 1)
            check_type(t[clause.var], clause.type, f"window ${clause.var}")
            return t

        i = items.top  # 0, or where a saved run stood (streaming.StreamState)
        t = None
        while items.has(i):
            # no window reaches before i now, but $previous of i; and no window was given
            # since the last time here: a run saved while it reads on goes on from here
            items.top = i
            items.release(i - 1)
            t = t or starts(i)
            if t is None:
                i += 1
                continue
            if clause.end is None:  # tumbling, no end: up to the next start
                e, nxt = i + 1, None
                while items.has(e) and (nxt := starts(e)) is None:
                    e += 1
                yield emit(t, i, e - 1)
                i, t = e, nxt
                continue
            e, u = find_end(i, t)
            started, t = t, None
            if u is None:
                if not clause.only_end:
                    last = items.last()
                    yield emit(bind(clause.end, started, last), i, last)
                if not clause.sliding:
                    return
            else:
                yield emit(u, i, e)
            i = i + 1 if clause.sliding else e + 1

    # -- the pattern clause ----------------------------------------------------

    def pattern(self, clause: A.Pattern, env: dict, items: LazyItems | None = None):
        """The pattern clause's tuples, each as soon as its instance is known: over its
        expression's value, or over ``items`` read from a stream — read only as far as
        the pattern looks, the items before the start being tried forgotten, and where
        it stands kept in ``items.progress`` (a saved run goes on from there)."""
        nfa = self._nfas.get(id(clause))
        if nfa is None:
            nfa = self._nfas[id(clause)] = compile_pattern(clause)
        if items is None:
            values = self.eval(clause.expr, env)
            seq, more, progress = values, len(values), None
        else:
            seq, more = items, items.has
            progress = items.progress = items.progress or new_progress()
        test, keyed, forget = self.pattern_test(clause, seq, more, env)
        masks = self.pattern_masks(clause, seq, test)
        reached = None
        if items is not None:

            def reached(i: int) -> None:  # nothing reaches before i - 1 ($pprev, $before)
                items.release(i - 1)
                forget(i - 1)
                if masks is not None:
                    masks.forget(i - 1)

        instances = find_instances(
            nfa, more, test, clause.sliding, clause.selection, keyed, masks, progress, reached
        )
        for start, end, runs in instances:
            t = dict(env)
            t[clause.var] = seq[start : end + 1]
            for var, run in zip(clause.variables, runs, strict=True):
                t[var.name] = as_value(seq[run[0] : run[1] + 1]) if run else []
            yield t

    def pattern_test(self, clause: A.Pattern, items, more, env: dict):
        """The item test of each pattern variable (memoized), the variables whose test
        depends on where their run started, and ``forget(i)``: drop what is memoized
        before position ``i``."""
        variables = clause.variables
        keyed = {i for i, v in enumerate(variables) if v.before or v.all or v.nested}
        checks = [self._pattern_check(v, items, more, env) for v in variables]
        by_position = [None if i in keyed else {} for i in range(len(variables))]
        by_start: dict = {}
        low, limit = [0], [4096]  # forgotten below; by_start is pruned when it passes limit

        def test(var: int, run_start: int, pos: int) -> int:
            memo = by_position[var]
            if memo is not None:
                known = memo.get(pos)
                if known is None:
                    known = memo[pos] = checks[var](run_start, pos)
                return known
            key = (var, run_start, pos)
            known = by_start.get(key)
            if known is None:
                known = by_start[key] = checks[var](run_start, pos)
            return known

        def forget(i: int) -> None:
            for memo in by_position:
                if memo is not None:
                    for pos in range(low[0], i):
                        memo.pop(pos, None)
            low[0] = max(low[0], i)
            if len(by_start) > limit[0]:  # (amortized: the limit doubles what is left)
                for key in [key for key in by_start if key[1] < i]:
                    del by_start[key]
                limit[0] = max(4096, 2 * len(by_start))

        return test, {i for i, v in enumerate(variables) if v.before or v.all}, forget

    def pattern_masks(self, clause: A.Pattern, items, test):
        """Per item, the bitmask of the variables whose test holds — when every ``when``
        compares the current item's attributes with literals (``item_column``), one pass
        per variable over the items; over a stream's (``LazyItems``) a ``LazyMasks``,
        computed as the pattern reads them (with ``test`` where a column falls back).
        ``None`` otherwise: the tests then run one by one, on demand."""
        columns = []
        for v in clause.variables:
            if v.nested or not v.pcur:  # (a column's condition reads only ``pcur``)
                return None
            when = v.when
            if not isinstance(when, A.XPath) or when.placeholders:
                return None
            column = item_column(when.token, v.pcur)
            if column is None:
                return None
            columns.append((v.item_type, column))
        if isinstance(items, LazyItems):

            def one_by_one(position: int) -> int:
                return sum(1 << v for v in range(len(columns)) if test(v, position, position))

            return LazyMasks(items, lambda chunk: _masks(columns, chunk), one_by_one)
        return _masks(columns, items)

    def _pattern_check(self, v: A.PatternVar, items, more, env: dict):
        """``check(run_start, pos)``: 1 if item ``pos`` joins a run of ``v`` that started
        at ``run_start`` (for ``nested``: the length of the unit at ``pos``, or 0).
        ``items``: a list (``more`` its length) or a stream's ``LazyItems`` (``more(i)``:
        is there an item ``i``); a nested variable needs a list."""
        local = dict(env)
        type_ok = type_test(v.item_type)
        when = self.condition(v.when)
        if v.nested:

            def nested_unit(run_start: int, pos: int) -> int:
                if v.before:
                    local[v.before] = items[run_start - 1] if run_start > 0 else []
                local[v.nested] = items[pos:]
                unit = self.first_result(v.when, local)
                k = len(unit)
                if k == 0 or k > more - pos:
                    return 0
                for j, item in enumerate(unit):
                    other = items[pos + j]
                    same = item is other if is_node(item) else item == other
                    if not same or not type_ok(other):
                        return 0
                return k

            return nested_unit
        roles = (v.pcur, v.pprev, v.after, v.before, v.all)
        if not any(roles[1:]):  # the common case: the condition looks at the item only
            pcur = v.pcur

            def check_item(run_start: int, pos: int) -> int:
                item = items[pos]
                if not type_ok(item):
                    return 0
                if pcur:
                    local[pcur] = item
                result = when(local)
                if len(result) == 1 and result[0] is True:
                    return 1
                return 1 if ebv(result) else 0

            return check_item

        has = more if callable(more) else (lambda i: i < more)

        def check(run_start: int, pos: int) -> int:
            item = items[pos]
            if not type_ok(item):
                return 0
            if v.pcur:
                local[v.pcur] = item
            if v.pprev:
                local[v.pprev] = items[pos - 1] if pos > 0 else []
            if v.after:
                local[v.after] = items[pos + 1] if has(pos + 1) else []
            if v.before:
                local[v.before] = items[run_start - 1] if run_start > 0 else []
            if v.all:
                local[v.all] = items[run_start : pos + 1]
            return 1 if ebv(when(local)) else 0

        return check


def _masks(columns: list, items: list) -> list[int] | None:
    """Per item, the bitmask of the variables whose column (``item_column``) holds; None
    where an item of a variable's type is not an element, or a column falls back."""
    elems = [item.elem if isinstance(item, ElementNode) else None for item in items]
    chosen: dict[str, list] = {}  # item type -> the elements it lets through
    masks = [0] * len(items)
    for bit, (item_type, column) in enumerate(columns):
        key = str(item_type)
        if key not in chosen:
            if item_type.kind == "element" and item_type.name not in (None, "*"):
                kept = [e is not None and e.tag == item_type.name for e in elems]
            else:
                type_ok = type_test(item_type)
                kept = [type_ok(item) for item in items]
            if any(k and e is None for k, e in zip(kept, elems, strict=True)):
                return None  # an item of the type that is not an element: the general path
            chosen[key] = [e if k else None for k, e in zip(kept, elems, strict=True)]
        try:
            truth = column(chosen[key])
        except Fallback:
            return None
        flag = 1 << bit
        masks = [m | flag if t else m for m, t in zip(masks, truth, strict=True)]
    return masks


def _fast(expr: A.XPath):
    """The expression's fast-path closure (compiled on first use), or ``False``."""
    if expr.fast is None:
        expr.fast = compile_fast(expr.token) or False
    return expr.fast


def _append_text(elem: ET.Element, text: str) -> None:
    if not text:
        return
    if len(elem):
        last = elem[-1]
        last.tail = (last.tail or "") + text
    else:
        elem.text = (elem.text or "") + text


# what evaluates each kind of expression and each FLWOR clause (a new clause: its node in
# ast.py, its parse in parser.CLAUSES, its evaluation here, its outline in explain.py)
EXPRESSIONS = {
    A.XPath: Evaluator.xpath,
    A.FLWOR: Evaluator.flwor,
    A.Sequence: Evaluator.sequence,
    A.Element: Evaluator.element,
    A.Prolog: Evaluator.prolog_body,
    A.External: Evaluator.external,
    A.Computed: Evaluator.computed,
    A.Typeswitch: Evaluator.typeswitch,
    A.If: Evaluator.conditional,
}
CLAUSES = {
    A.For: Evaluator.for_clause,
    A.Let: Evaluator.let_clause,
    A.Where: Evaluator.where_clause,
    A.Count: Evaluator.count_clause,
    A.GroupBy: Evaluator.group_by,
    A.OrderBy: Evaluator.order_by,
    A.Window: Evaluator.window_clause,
    A.Pattern: Evaluator.pattern_clause,
}
