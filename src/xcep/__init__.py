"""xcep: complex event processing and publish/subscribe over XML and JSON streams."""

from xcep.errors import InputError, XcepError
from xcep.events import EventStream, iter_events, parse

__version__ = "0.1.0"
__all__ = ["EventStream", "InputError", "XcepError", "__version__", "iter_events", "parse"]
