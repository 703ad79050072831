"""``xcep serve``: the standing queries of every kind on a message broker (NATS
JetStream). See ``service.py`` and docs/serve.md.

The names below are imported when first used (the command line imports this package
for its commands' arguments: asyncio and the service wait until a command runs)."""

import importlib

_FROM = {
    "Service": "xcep.serve.service",
    "local_server": "xcep.serve.broker",
    "run_service": "xcep.serve.service",
    "send_control": "xcep.serve.service",
}
__all__ = sorted(_FROM)


def __getattr__(name: str):
    if name not in _FROM:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = globals()[name] = getattr(importlib.import_module(_FROM[name]), name)
    return value
