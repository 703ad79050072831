"""Filters (``xcep.xpush``) as a plan: one row per document, its matching filters."""

from __future__ import annotations

from xcep.collector import collector_paused
from xcep.events.model import EventBatch
from xcep.events.stepping import Stepper
from xcep.plans.base import OpenDocument, Plan, Row, Run


class FilterPlan(Plan):
    """Boolean XPath filters (``xcep.xpush``): one row per document, its filters.

    ``queries`` is id → text, or a ``Workload`` already parsed (a filters file read
    with its bad lines reported). Options: the ``MachineOptions`` (``top_down``,
    ``order``, ``early``, ``max_entries``), ``dtd`` (a DTD file: with ``order`` its
    element order prunes states, with ``train`` its structure shapes the training
    documents), ``train`` (warm the tables before the first document) and ``answers``:
    ``"ids"`` (a row's value the list of ids) or ``"json"`` (the text of that list,
    written in C without a Python object per id)."""

    kind = "filter"
    can = frozenset({"snapshot", "add", "remove"})

    def __init__(
        self,
        queries,
        dtd: str | None = None,
        train: bool = False,
        answers: str = "ids",
        **options,
    ) -> None:
        from xcep.xpush import MachineOptions, Workload

        parsed = queries if isinstance(queries, Workload) else None
        texts = {} if parsed is not None else queries
        super().__init__(texts, dtd=dtd, train=train, answers=answers, **options)
        # a workload's filters by id as a dict when first asked for (a million filters: a
        # second dict by id while loading, for what snapshots and ``explain`` read): its
        # columns copied now (the first run changes them as filters come and go)
        if parsed is not None:
            self._columns = (list(parsed.names_of), list(parsed.text_of))
        if answers not in ("ids", "json"):
            raise ValueError(f"answers are 'ids' or 'json', not {answers!r}")
        if options.get("order") and dtd is None:
            raise ValueError("order needs a DTD (the order of elements comes from it)")
        self.machine_options = MachineOptions(**options)
        self.schema = None
        if dtd is not None:
            from xcep.schema import read_dtd

            self.schema = read_dtd(dtd)
        # parsed once (a bad filter fails here), and lent to the first run: a machine
        # changes its workload as filters come and go, so later runs parse their own
        with collector_paused():  # many filters: every object new
            self._workload = parsed if parsed is not None else Workload(self.queries)

    @property
    def queries(self) -> dict:
        if self._columns is not None:  # (a removed filter's text is None)
            names_of, text_of = self._columns
            queries = {
                f: text for f, text in zip(names_of, text_of, strict=True) if text is not None
            }
            self._queries, self._columns = queries, None
        return self._queries

    @queries.setter
    def queries(self, queries: dict) -> None:
        self._queries, self._columns = queries, None

    def __getstate__(self) -> dict:  # a plan travels as its queries
        return {**self.__dict__, "_workload": None, "_queries": self.queries, "_columns": None}

    def start(self, filters: dict | None = None) -> FilterRun:
        from xcep.xpush import Workload

        workload, self._workload = self._workload, None
        if filters is not None or workload is None:
            with collector_paused():
                workload = Workload(self.queries if filters is None else filters)
        return FilterRun(self, workload)

    def _restore(self, state) -> FilterRun:
        run = self.start(state["filters"])
        run.documents = state["documents"]
        for batch in state["open"]:  # the open document's events: read again
            run.feed(batch)
        return run

    def explain(self) -> str:
        stats = self.start().machine.stats_dict()
        return (
            f"{len(self.queries)} filters, one lazy XPush machine: {stats['afa_states']} AFA "
            f"states, {stats['atomic_predicates']} atomic predicates"
        )


class FilterRun(Run):
    def __init__(self, plan: FilterPlan, workload) -> None:
        super().__init__(plan)
        from xcep.xpush import XPushMachine

        order_facts = plan.schema if plan.machine_options.order else None
        self.machine = XPushMachine(workload, plan.machine_options, order_facts)
        if plan.options["train"]:
            self.machine.train(plan.schema)
        as_json = plan.options["answers"] == "json"
        self.pass_ = Stepper(lambda batches: self.machine.run(batches, as_json=as_json))
        self.open = OpenDocument()

    def _feed(self, batch: EventBatch) -> list[Row]:
        found = self.pass_.feed(batch)
        self.documents += len(found)
        self.open.note(batch)
        return [Row(None, doc, ids) for doc, ids in found]

    def _finish(self) -> list[Row]:
        found = self.pass_.end()
        self.documents += len(found)
        return [Row(None, doc, ids) for doc, ids in found]

    def _state(self):
        return {
            "filters": self.machine.filters(),
            "open": self.open.batches,
            "documents": self.documents,
        }

    def queries(self) -> dict:
        return self.machine.filters()

    def add(self, query_id, text: str) -> None:
        self.machine.add_filter(query_id, text)

    def remove(self, query_id) -> None:
        self.machine.remove_filter(query_id)

    def stats(self) -> dict:
        return {**self.machine.stats_dict(), **super().stats(), "queries": len(self.machine)}
