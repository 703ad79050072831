"""Each engine's Spark job on a standalone cluster (a master and two workers on loopback,
their executors and Python workers processes of their own) gives what it gives in
local mode."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from xcep.spark.cluster import standalone

JOBS = {
    "filter": lambda d: ["filter", "--filters", str(d / "filters.txt")],
    "xseq": lambda d: ["xseq", "/t[@p > 2]/@p"],
    "xquery": lambda d: ["xquery", "for $t in $input/t where $t/v = 1 return string($t/@p)"],
    "xscl": lambda d: ["xscl", "--queries", str(d / "joins.txt")],
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with standalone(workers=2, work=tmp_path_factory.mktemp("spark-cluster")) as url:
        yield url


@pytest.fixture(scope="module")
def messages(tmp_path_factory):
    root = tmp_path_factory.mktemp("messages")
    inputs = root / "in"
    inputs.mkdir()
    for i in range(20):
        (inputs / f"m{i:02}.xml").write_text(f'<t p="{i * 7 % 11}"><v>{i % 3}</v></t>')
    (root / "filters.txt").write_text("1 /t[@p > 5]\n2 /t[v = 1]\n")
    (root / "joins.txt").write_text("j\tS/t->x1[/v->x2] JOIN{x2 = y2, 5} S/t->y1[/v->y2]\n")
    return root


def _job(kind: str, messages, master: str) -> list[str]:
    command = [sys.executable, "-m", "xcep", "spark", *JOBS[kind](messages)]
    done = subprocess.run(
        [*command, "--master", master, str(messages / "in")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-500:]
    return sorted(done.stdout.splitlines())


@pytest.mark.parametrize("kind", sorted(JOBS))
def test_a_job_on_the_cluster_gives_what_it_gives_in_local_mode(cluster, messages, kind):
    on_cluster = _job(kind, messages, cluster)
    assert on_cluster  # (every job finds something in these messages)
    assert on_cluster == _job(kind, messages, "local[2]")


def _parents() -> dict[int, int]:
    """Every live (not zombie) process: its parent's pid."""
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    state, parent = stat.read().rsplit(")", 1)[1].split()[:2]
            except OSError:
                continue
            if state != "Z":
                found[int(entry)] = int(parent)
    return found


def test_a_terminated_owner_stops_the_cluster(tmp_path):
    """SIGTERM to the process holding a cluster stops the master it started."""
    script = (
        "import sys\n"
        "from xcep.spark.cluster import standalone\n"
        f"with standalone(workers=0, work={str(tmp_path)!r}):\n"
        "    print('up', flush=True)\n"
        "    sys.stdin.read()\n"
    )
    owner = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert owner.stdout.readline().strip() == "up"
    (master,) = [p for p, parent in _parents().items() if parent == owner.pid]
    os.kill(owner.pid, signal.SIGTERM)
    assert owner.wait(60) == 128 + signal.SIGTERM
    deadline = time.monotonic() + 30
    while master in _parents() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert master not in _parents()
