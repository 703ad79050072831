"""Schema facts (DTDs) used by the optimizers of the engines."""

from xcep.schema.dtd import Dtd, DtdError, parse_dtd, read_dtd

__all__ = ["Dtd", "DtdError", "parse_dtd", "read_dtd"]
