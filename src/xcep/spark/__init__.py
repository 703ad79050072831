"""xcep pipelines on Apache Spark (PySpark): every engine, batch and streaming.

>>> from xcep import spark as xs
>>> session = xs.session("local[4]")  # doctest: +SKIP
>>> units = xs.read_units(session, "docs/")  # files, records, or a stream  # doctest: +SKIP
>>> xs.write(xs.filter_units(units, {1: "//item[price > 100]"}), "out/", "json")  # doctest: +SKIP

(Not run as a doctest: it starts a Spark session; tests/test_spark.py runs the same
calls on the session the tests share.)

Needs the ``spark`` extra (PySpark 4.3, Java 17). See docs/spark.md. The names below
are imported when first used (the command line imports this package for its commands'
arguments: PySpark waits until a job runs).
"""

import importlib

_FROM = {  # name -> (module, its name there)
    "filter_units": ("xcep.spark.filter", "filter_units"),
    "read_output": ("xcep.spark.sinks", "read_output"),
    "read_units": ("xcep.spark.sources", "read_units"),
    "session": ("xcep.spark.session", "session"),
    "write": ("xcep.spark.sinks", "write"),
    "xquery_units": ("xcep.spark.xquery", "xquery_units"),
    "xscl_stream": ("xcep.spark.xscl", "run_stream"),
    "xscl_units": ("xcep.spark.xscl", "xscl_units"),
    "xseq_units": ("xcep.spark.xseq", "xseq_units"),
}
__all__ = sorted(_FROM)


def __getattr__(name: str):
    if name not in _FROM:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, attribute = _FROM[name]
    value = globals()[name] = getattr(importlib.import_module(module), attribute)
    return value
