"""A small driver for the W3C QT3 test suite (the subset in ../shared/data/qt3).

``run_set(qt3_dir, "WindowClause")`` runs one test set with xcep's XQuery
and returns one ``Outcome`` per test case: ``pass``, ``fail`` or ``skip``
(with the reason: a feature outside xcep's subset, a schema-aware
environment, a prolog other than variable, function and namespace declarations).
``python -m tests.qt3 DIR SET...`` prints the rates.
"""

from __future__ import annotations

import re
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

from xcep import xquery
from xcep.xquery.values import ebv, is_node, serialize, string_value

NS = {"q": "http://www.w3.org/2010/09/qt-fots-catalog"}
OUTSIDE = {  # dependencies xcep's subset does not have
    "schemaImport",
    "schemaValidation",
    "namespace-axis",
    "staticTyping",
    "typedData",
    "non_unicode_codepoint_collation",
    "collection-stability",
    "directory-as-collection-uri",
}
PROLOG = re.compile(r"(^|;)\s*(declare|import|module)\s+([\w-]+)", re.M)


@dataclass
class Outcome:
    name: str
    status: str  # pass, fail, skip
    detail: str = ""
    query: str = ""
    markup: bool = False  # its input documents hold comments or processing instructions
    expected: str = ""  # the error codes the case expects, if it expects one


def run_set(qt3: Path, name: str) -> list[Outcome]:
    path = qt3 / "prod" / f"{name}.xml"
    test_set = ET.parse(path).getroot()
    environments = _environments(ET.parse(qt3 / "catalog.xml").getroot(), qt3)
    environments.update(_environments(test_set, path.parent))
    out = []
    for case in test_set.findall("q:test-case", NS):
        out.append(_run_case(case, environments, path.parent))
    return out


def _environments(root: ET.Element, base: Path) -> dict:
    return {env.get("name"): (env, base) for env in root.findall("q:environment", NS)}


def _skip_reason(case: ET.Element, environments: dict) -> str | None:
    for dep in case.findall("q:dependency", NS):
        value, kind = dep.get("value", ""), dep.get("type")
        if dep.get("satisfied") == "false":
            continue
        if kind == "spec" and not any(v.startswith("XQ") and _spec_ok(v) for v in value.split()):
            return f"spec {value}"
        if kind == "feature" and value in OUTSIDE:
            return f"feature {value}"
        if kind in ("xml-version", "xsd-version") and value not in ("1.0", "1.0:4-"):
            return f"{kind} {value}"
    env = case.find("q:environment", NS)
    if env is not None and env.get("ref") and env.get("ref") not in environments:
        return f"environment {env.get('ref')}"
    element = environments.get(env.get("ref"), (env, None))[0] if env is not None else None
    if element is not None:
        if element.find("q:schema", NS) is not None:
            return "schema-aware environment"
        if element.find("q:collection", NS) is not None or element.find("q:resource", NS):
            return "collections/resources"
    test = case.find("q:test", NS)
    text = _strip_version(test.text or "")
    kinds = {(m.group(2), m.group(3)) for m in PROLOG.finditer(text)}
    external = re.search(r"declare\s+variable[^;]*\bexternal\b", text)
    defaults = re.findall(r"(?:^|;)\s*declare\s+default\s+([\w-]+)", text, re.M)
    if any(d != "element" for d in defaults):
        return "prolog (a default other than the element namespace): outside the subset"
    if kinds - {("declare", k) for k in ("variable", "function", "namespace", "default")}:
        return "prolog (declare/import other than variables, functions, namespaces)"
    if external:
        return "prolog (external variables): outside the subset"
    return None


def _spec_ok(value: str) -> bool:
    """XQ10+, XQ30+, XQ31+ and XQ30/XQ31 apply to an XQuery 3.1 processor; XQ10 alone does not."""
    return value.endswith("+") or value in ("XQ30", "XQ31")


def _strip_version(text: str) -> str:
    return re.sub(r"^\s*xquery\s+version\s+\"[^\"]*\"(\s+encoding\s+\"[^\"]*\")?\s*;", "", text)


def _run_case(case: ET.Element, environments: dict, base: Path) -> Outcome:
    name = case.get("name")
    reason = _skip_reason(case, environments)
    if reason:
        return Outcome(name, "skip", reason)
    test = case.find("q:test", NS)
    text = test.text or ""
    if test.get("file"):
        text = (base / test.get("file")).read_text(encoding="utf-8")
    text = _static_namespaces(case, environments) + _strip_version(text)
    try:
        context, variables = _load_environment(case, environments)
    except (ET.ParseError, OSError) as exc:
        return Outcome(name, "skip", f"document: {exc}")
    result_spec = case.find("q:result", NS)[0]
    markup = _has_markup(case, environments)
    expected = " ".join(e.get("code", "") for e in result_spec.iter(f"{{{NS['q']}}}error"))
    if result_spec.tag.endswith("}error"):
        expected = result_spec.get("code", "")
    try:
        query = xquery.compile(text)
        items = query.evaluate(context, variables)
        # serializing is part of evaluating: it raises the serialization errors
        [serialize(i) for i in items]
    except Exception as exc:
        ok = _expects_error(result_spec)
        return Outcome(name, "pass" if ok else "fail", f"{type(exc).__name__}: {exc}", text, markup)
    try:
        ok = _check(result_spec, items)
    except Exception as exc:
        detail = f"checking: {type(exc).__name__}: {exc}"
        return Outcome(name, "fail", detail, text, markup, expected)
    detail = "" if ok else f"got {_serialize_sequence(items)[:300]!r}"
    return Outcome(name, "pass" if ok else "fail", detail, text, markup, expected)


def _has_markup(case: ET.Element, environments: dict) -> bool:
    """Do the case's input documents hold comments or processing instructions?"""
    env = case.find("q:environment", NS)
    if env is None:
        return False
    element, base = environments[env.get("ref")] if env.get("ref") else (env, None)
    for source in element.findall("q:source", NS):
        text = ((base or Path(".")) / source.get("file")).read_text(errors="replace")
        if re.search(r"<!--|<\?(?!xml[\s?])", text):
            return True
    return False


def _static_namespaces(case: ET.Element, environments: dict) -> str:
    """The environment's statically known namespaces, as the prolog declarations that
    give them."""
    env = case.find("q:environment", NS)
    if env is None:
        return ""
    element = environments[env.get("ref")][0] if env.get("ref") else env
    return "".join(
        f'declare namespace {ns.get("prefix")} = "{ns.get("uri")}"; '
        for ns in element.findall("q:namespace", NS)
    )


def _load_environment(case: ET.Element, environments: dict):
    env = case.find("q:environment", NS)
    if env is None:
        return None, {}
    element, base = environments[env.get("ref")] if env.get("ref") else (env, None)
    base = base or Path(".")
    context = None
    variables = {}
    for source in element.findall("q:source", NS):
        tree = ET.parse(base / source.get("file"))
        role = source.get("role")
        if role == ".":
            context = tree
        elif role and role.startswith("$"):
            variables[role[1:]] = xquery.compile(".").evaluate(tree)[0]
    for param in element.findall("q:param", NS):
        if param.get("select"):
            value = xquery.compile(param.get("select")).evaluate(None)
            variables[param.get("name")] = value[0] if len(value) == 1 else value
    return context, variables


def _expects_error(spec: ET.Element) -> bool:
    tag = spec.tag.split("}")[1]
    if tag == "error":
        return True
    if tag == "any-of":
        return any(_expects_error(s) for s in spec)
    return False


def _serialize_sequence(items: list) -> str:
    out = []
    previous_atomic = False
    for item in items:
        atomic = not is_node(item)
        if atomic and previous_atomic:
            out.append(" ")
        out.append(serialize(item))
        previous_atomic = atomic
    return "".join(out)


def _canonical_xml(fragment: str) -> str:
    return ET.canonicalize(f"<qt3-wrap>{fragment}</qt3-wrap>", rewrite_prefixes=True)


def _evaluate(text: str, result: list | None = None) -> list:
    return xquery.compile(text).evaluate(None, {"result": result} if result is not None else None)


def _same_items(left: list, right: list) -> bool:
    if len(left) != len(right):
        return False
    for a, b in zip(left, right, strict=True):
        if is_node(a) != is_node(b):
            return False
        if is_node(a):
            if _canonical_xml(serialize(a)) != _canonical_xml(serialize(b)):
                return False
        elif not _equal_atoms(a, b):
            return False
    return True


def _equal_atoms(a, b) -> bool:
    numbers = (int, float, Decimal)
    if isinstance(a, numbers) and isinstance(b, numbers) and not isinstance(a, bool):
        if a != a and b != b:
            return True
        return float(a) == float(b)
    return (type(a) is type(b) and string_value(a) == string_value(b)) or (
        isinstance(a, str) and isinstance(b, str) and a == b
    )


def _check(spec: ET.Element, items: list) -> bool:
    tag = spec.tag.split("}")[1]
    text = spec.text or ""
    if tag == "any-of":
        return any(_check(s, items) for s in spec)
    if tag == "all-of":
        return all(_check(s, items) for s in spec)
    if tag == "error":
        return False
    if tag == "assert-empty":
        return items == []
    if tag == "assert-true":
        return items == [True]
    if tag == "assert-false":
        return items == [False]
    if tag == "assert-count":
        return len(items) == int(text)
    if tag == "assert-xml":
        if spec.get("file"):
            return False
        try:
            return _canonical_xml(_serialize_sequence(items)) == _canonical_xml(text)
        except ET.ParseError:
            return False
    if tag == "assert-string-value":
        value = " ".join(string_value(i) for i in items)
        if spec.get("normalize-space") == "true":
            value, text = " ".join(value.split()), " ".join(text.split())
        return value == text
    if tag == "assert-deep-eq":
        return _same_items(items, _evaluate(text))
    if tag == "assert-eq":
        expected = _evaluate(text)
        return len(items) == 1 and len(expected) == 1 and _equal_atoms(items[0], expected[0])
    if tag == "assert-permutation":
        expected = _evaluate(text)
        return sorted(map(serialize, items)) == sorted(map(serialize, expected))
    if tag == "assert":  # its effective boolean value (a node sequence is true)
        return ebv(_evaluate(text, items))
    if tag == "assert-type":
        return _evaluate(f"$result instance of {text}", items) == [True]
    raise NotImplementedError(tag)


def summary(outcomes: list[Outcome]) -> dict:
    counts = {"pass": 0, "fail": 0, "skip": 0}
    for o in outcomes:
        counts[o.status] += 1
    run = counts["pass"] + counts["fail"]
    counts["rate"] = round(counts["pass"] / run, 3) if run else None
    return counts


# why a case fails, by what its query uses or what it raised (first that applies)
KINDS = (
    (
        "namespaces",
        r"xmlns|namespace-uri|in-scope-prefixes|QName|prefix-from|namespace::|\*:|:\*",
        "namespaces where the prolog declares none (names are then kept as spelled), "
        "the in-scope namespaces of nodes (namespace-uri-for-prefix), namespace nodes",
    ),
    (
        "processing instructions",
        r"processing-instruction|<\?",
        "processing-instruction nodes are dropped from documents and constructors",
    ),
    ("comments", r"comment\(|<!--", "comment nodes are dropped from documents and constructors"),
    (
        "node identity",
        r"\bis\b|<<|>>",
        "identity or order of nodes built by constructors against the input's",
    ),
)


def failure_kind(outcome: Outcome) -> tuple[str, str]:
    """(kind, why) of a failed case: the first of ``KINDS`` its query uses, else what
    happened."""
    if outcome.expected and outcome.detail.startswith("got "):
        return "a static or dynamic error not raised", (
            "the case expects an error (XQST0089, XQST0094, XPTY0004, …) that xcep does not raise"
        )
    for kind, pattern, why in KINDS:
        if re.search(pattern, outcome.query):
            return kind, why
    if outcome.markup and re.search(r"node\(\)|\bnode\b|string\(|text\(\)", outcome.query):
        return "comments or PIs in the input", (
            "the input holds comments or processing instructions, which documents drop"
        )
    if re.search(r"</?\w|document\s*\{|element\s*\{", outcome.query):
        return "constructed nodes", (
            "nodes built by the query: their identity, document order or root "
            "(`<a/>/(b, a)` in order, `document{…}/(/)`)"
        )
    if outcome.detail.startswith("got "):
        return "other: a wrong answer", "a result that is not the expected one"
    return "other: an error raised", "an error where the case expects a result"


def failures_markdown(qt3_dir: Path, names: list[str]) -> str:
    """Every failing case of the sets, with why (docs/qt3-failures.md)."""
    rows, kinds = [], {}
    for set_name in names:
        for o in run_set(qt3_dir, set_name):
            if o.status == "fail":
                kind, why = failure_kind(o)
                kinds.setdefault(kind, [why, 0])[1] += 1
                what = " ".join(o.detail.split())[:140].replace("|", "\\|")
                rows.append(f"| {set_name} | {o.name} | {kind} | {what} |")
    head = ["| kind | cases | why |", "|---|---|---|"]
    for kind, (why, count) in sorted(kinds.items(), key=lambda item: -item[1][1]):
        head.append(f"| {kind} | {count} | {why} |")
    table = ["| set | case | kind | what xcep gave |", "|---|---|---|---|", *rows]
    return "\n".join([*head, "", *table])


if __name__ == "__main__":
    qt3_dir = Path(sys.argv[1])
    verbose = "-v" in sys.argv
    names = [a for a in sys.argv[2:] if not a.startswith("-")]
    if "--failures" in sys.argv:  # python -m tests.qt3 DIR SET... --failures
        print(failures_markdown(qt3_dir, names))
        sys.exit(0)
    for set_name in names:
        outcomes = run_set(qt3_dir, set_name)
        print(set_name, summary(outcomes))
        if verbose:
            for o in outcomes:
                if o.status != "pass":
                    print(f"  {o.status} {o.name}: {o.detail[:200]}")
