"""The Spark session xcep's jobs run in."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


LOG4J = Path(__file__).with_name("log4j2.properties")  # errors only


def session(
    master: str | None = None,
    app_name: str = "xcep",
    conf: dict | None = None,
    remote: str | None = None,
    quiet: bool = True,
) -> SparkSession:
    """A Spark session (an existing one is reused): ``local[*]`` unless ``master`` says
    otherwise, the web UI off, Python workers on this interpreter (where xcep is
    installed), the RocksDB state store for streaming state, cached blocks compressed, memory
    pages of 2 MB.
    ``conf``: more Spark settings, ``{"spark.sql.shuffle.partitions": 4}``. ``remote``:
    a Spark Connect session instead (``sc://host:15002``, or ``local[2]`` for a local
    Connect server), with the settings a Connect client may change. ``quiet``: the JVM
    logs errors only (``log4j2.properties`` beside this module; Spark's own warnings at
    start-up — loopback address, native Hadoop — are noise for a command line), and a
    local master binds to the loopback address (``SPARK_LOCAL_IP``, unless set)."""
    try:
        from pyspark.sql import SparkSession
    except ImportError as exc:  # pragma: no cover - depends on the installation
        raise ImportError("xcep's Spark pipelines need PySpark: pip install 'xcep[spark]'") from exc
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    settings = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": str(os.cpu_count() or 2),
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.streaming.stateStore.providerClass": ROCKSDB,
        "spark.sql.session.timeZone": "UTC",
        # cached blocks written to disk are compressed (XSCL caches its witness rows and
        # XML parts: at 10 GB of input they took 36 GB of local disk uncompressed)
        "spark.rdd.compress": "true",
        # Spark sizes a memory page from the heap (16 MB at 1 GB, 64 MB at 2 GB), and each
        # broadcast join a task reads holds at least one page until the task ends: when
        # XSCL's Stage 2 ran every template's joins in one stage, 6 templates over small
        # inputs ran a 1 GB driver out of execution memory at 16 MB pages (at 8 MB they ran)
        "spark.buffer.pageSize": "2m",
    }
    if quiet:
        settings["spark.driver.extraJavaOptions"] = f"-Dlog4j2.configurationFile={LOG4J.as_uri()}"
        if (master or "local").startswith("local"):
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    settings.update({key: str(value) for key, value in (conf or {}).items()})
    if remote is not None:
        spark = SparkSession.builder.remote(remote).getOrCreate()
        for key, value in settings.items():
            if key.startswith("spark.sql."):  # the others are fixed when the server starts
                spark.conf.set(key, value)
        return spark
    builder = SparkSession.builder.appName(app_name).master(master or "local[*]")
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
