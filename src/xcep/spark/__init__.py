"""xcep pipelines on Apache Spark (PySpark): every engine, batch and streaming.

>>> from xcep import spark as xs
>>> session = xs.session("local[4]")  # doctest: +SKIP
>>> units = xs.read_units(session, "docs/")  # files, records, or a stream  # doctest: +SKIP
>>> xs.write(xs.filter_units(units, {1: "//item[price > 100]"}), "out/", "json")  # doctest: +SKIP

(Not run as a doctest: it starts a Spark session; tests/test_spark.py runs the same
calls on the session the tests share.)

Needs the ``spark`` extra (PySpark 4.3, Java 17). See docs/spark.md.
"""

from xcep.spark.filter import filter_units
from xcep.spark.session import session
from xcep.spark.sinks import read_output, write
from xcep.spark.sources import read_units
from xcep.spark.xquery import xquery_units
from xcep.spark.xscl import run_stream as xscl_stream
from xcep.spark.xscl import xscl_units
from xcep.spark.xseq import xseq_units

__all__ = [
    "filter_units",
    "read_output",
    "read_units",
    "session",
    "write",
    "xquery_units",
    "xscl_stream",
    "xscl_units",
    "xseq_units",
]
