"""A Spark standalone cluster on loopback, from this environment's PySpark.

``standalone(workers=2)`` starts a master and ``workers`` workers as processes of
their own (PySpark's ``spark-class org.apache.spark.deploy.master.Master`` and
``…worker.Worker``, small memory), waits until every worker has registered, yields
the master's URL (``spark://127.0.0.1:PORT``) and stops them all at the end, even
on failure or SIGTERM. Jobs then run with ``--master URL``: their Python workers are other
processes than the driver's, as on a real cluster (here on this machine, with this
interpreter; see docs/spark.md for a real one).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from xcep.loopback import free_port


def spark_class() -> str:
    import pyspark

    return str(Path(pyspark.__file__).parent / "bin" / "spark-class")


def _alive_workers(ui_port: int) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=2) as answer:
        state = json.load(answer)
    return sum(1 for worker in state.get("workers", []) if worker.get("state") == "ALIVE")


@contextlib.contextmanager
def standalone(
    workers: int = 2, cores: int = 1, memory: str = "1g", work: str | Path | None = None
) -> Iterator[str]:
    """A master and ``workers`` workers on loopback: the master's URL."""
    work_dir = Path(work) if work is not None else None
    cleanup = work_dir is None
    if work_dir is None:
        import tempfile

        work_dir = Path(tempfile.mkdtemp(prefix="xcep-spark-"))
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable)
    env.setdefault("SPARK_LOG_DIR", str(work_dir / "logs"))
    port, ui = free_port(), free_port()
    master = f"spark://127.0.0.1:{port}"
    processes: list[subprocess.Popen] = []
    logs: list = []

    def start(name: str, *args: str) -> None:
        log = open(work_dir / f"{name}.log", "wb")  # noqa: SIM115 - closed at the end
        logs.append(log)
        processes.append(subprocess.Popen([spark_class(), *args], stdout=log, stderr=log, env=env))

    def terminated(signum, frame):  # a SIGTERM unwinds through the ``finally`` below
        raise SystemExit(128 + signum)

    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, terminated) if main else None
    try:
        start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
              "--port", str(port), "--webui-port", str(ui))  # fmt: skip
        for k in range(workers):
            start(f"worker-{k}", "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                  "--cores", str(cores), "--memory", memory, "--webui-port", str(free_port()),
                  "--work-dir", str(work_dir / f"work-{k}"), master)  # fmt: skip
        deadline = time.monotonic() + 120
        while True:
            with contextlib.suppress(OSError, ValueError):
                if _alive_workers(ui) >= workers:
                    break
            if time.monotonic() > deadline or any(p.poll() is not None for p in processes):
                raise RuntimeError(f"the Spark cluster did not start: see {work_dir}")
            time.sleep(0.5)
        yield master
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for log in logs:
            log.close()
        if cleanup:
            shutil.rmtree(work_dir, ignore_errors=True)
        if main:
            signal.signal(signal.SIGTERM, previous)
