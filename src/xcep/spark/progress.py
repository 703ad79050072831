"""A progress bar for Spark batch jobs: finished tasks of the running stages, on stderr."""

from __future__ import annotations

import contextlib
import threading
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from collections.abc import Iterator

    from pyspark.sql import SparkSession


@contextlib.contextmanager
def spark_progress(spark: SparkSession, stderr: TextIO, enabled: bool | None) -> Iterator[None]:
    """Show a tqdm bar of tasks while the block runs (on a terminal, or when forced)."""
    if enabled is False or (enabled is None and not stderr.isatty()):
        yield
        return
    try:
        tracker = spark.sparkContext.statusTracker()
    except Exception:  # a Connect session has no status tracker: no bar
        yield
        return
    from tqdm import tqdm

    stop = threading.Event()
    bar = tqdm(total=0, unit="task", file=stderr, leave=False, delay=0.5 if enabled is None else 0)

    def poll() -> None:
        while not stop.wait(0.25):
            infos = [tracker.getStageInfo(s) for s in tracker.getActiveStageIds()]
            infos = [i for i in infos if i is not None]
            if infos:
                bar.total = sum(i.numTasks for i in infos)
                bar.n = sum(i.numCompletedTasks for i in infos)
                bar.set_description(infos[0].name.split(" at ")[0][:30])
                bar.refresh()

    thread = threading.Thread(target=poll, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        bar.close()
