"""XQuery peers for the benchmarks, each run in a process of its own with a time limit.

``python -m bench.peers saxon QUERY_FILE XML_FILE`` prints ``count seconds``: the
query's (numeric) result and the time Saxon took to parse the input and run the
query, measured inside the process (interpreter start-up left out).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path


class PeerTimeout(Exception):
    pass


def _saxon(query: str, xml: str) -> tuple[int, float]:
    from saxonche import PySaxonProcessor

    with PySaxonProcessor(license=False) as processor:
        start = time.perf_counter()
        xquery = processor.new_xquery_processor()
        xquery.set_context(xdm_item=processor.parse_xml(xml_file_name=xml))
        xquery.set_query_content(query)
        text = xquery.run_query_to_string(encoding="UTF-8")
        seconds = time.perf_counter() - start
    return int(float(text.split(">")[-1])), seconds


def count_in_child(module_args: list[str], query: str, path: Path, timeout: float):
    """Run ``python -m MODULE_ARGS QUERY_FILE XML`` (a child process, killed at the
    timeout): it prints ``count seconds``, timed inside the child."""
    with tempfile.NamedTemporaryFile("w", suffix=".xq", delete=False) as handle:
        handle.write(query)
    try:
        done = _run_killable([sys.executable, "-m", *module_args, handle.name, str(path)], timeout)
    finally:
        Path(handle.name).unlink()
    if done.returncode:
        raise RuntimeError((done.stderr.strip().splitlines() or ["failed"])[-1])
    count, seconds = done.stdout.split()
    return int(count), float(seconds)


def saxon_count(query: str, path: Path, timeout: float) -> tuple[int, float]:
    return count_in_child(["bench.peers", "saxon"], query, path, timeout)


_STARTUP: list[float] = []


def _run_killable(command: list[str], timeout: float) -> subprocess.CompletedProcess:
    """Run ``command``; on timeout kill its whole process group (basex is a shell script
    whose JVM would otherwise outlive the kill and hold the pipes open)."""
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired as error:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        raise PeerTimeout from error
    return subprocess.CompletedProcess(command, process.returncode, out, err)


def basex_count(query: str, path: Path, timeout: float) -> tuple[int, float]:
    """BaseX's count and time: wall time less the JVM start-up (``basex 1``, measured once)."""
    if not _STARTUP:
        start = time.perf_counter()
        subprocess.run(["basex", "1"], capture_output=True, check=True)
        _STARTUP.append(time.perf_counter() - start)
    start = time.perf_counter()
    done = _run_killable(["basex", "-i", str(path), query], timeout)
    seconds = time.perf_counter() - start - _STARTUP[0]
    if done.returncode:
        raise RuntimeError((done.stderr.strip().splitlines() or ["failed"])[-1])
    return int(float(done.stdout.strip())), max(seconds, 0.0)


def available() -> dict:
    peers = {}
    try:
        import saxonche  # noqa: F401

        peers["Saxon"] = saxon_count
    except ImportError:
        print("saxonche is not installed (make bench installs it): Saxon is left out")
    if shutil.which("basex"):
        peers["BaseX"] = basex_count
    else:
        print("basex is not installed (apt-get install basex): BaseX is left out")
    return peers


if __name__ == "__main__":
    _, engine, query_file, xml = sys.argv
    assert engine == "saxon"
    count, seconds = _saxon(Path(query_file).read_text(), xml)
    print(count, re.sub(r"\s", "", f"{seconds:.6f}"))
