"""``xcep serve``: the standing queries of every kind on a message broker (NATS
JetStream). See ``service.py`` and docs/serve.md."""

from xcep.serve.broker import local_server
from xcep.serve.service import Service, run_service, send_control

__all__ = ["Service", "local_server", "run_service", "send_control"]
