"""Every ``>>>`` example in xcep's docstrings runs (the Spark one is marked not to: it
starts a session; tests/test_spark.py makes the same calls)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import xcep


def _modules() -> list[str]:
    found = []
    for info in pkgutil.walk_packages(xcep.__path__, "xcep."):
        if (".spark." in info.name and not info.ispkg) or info.name.endswith("__main__"):
            continue  # PySpark at import time (the package's docstring is enough); the CLI
        found.append(info.name)
    return ["xcep", *found]


@pytest.mark.parametrize("name", _modules())
def test_docstring_examples_run(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0, f"{name}: {result.failed} of {result.attempted} examples failed"


def test_the_examples_are_there():
    attempted = sum(
        doctest.testmod(importlib.import_module(n), report=False).attempted for n in _modules()
    )
    assert attempted >= 20
