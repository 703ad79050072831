"""Schema facts (DTDs) used by the optimizers of the engines."""

from xcep.schema.dtd import Dtd, DtdError, internal_subset, parse_dtd, read_dtd
from xcep.schema.learn import LearnedSchema, learn_schema

__all__ = [
    "Dtd",
    "DtdError",
    "LearnedSchema",
    "internal_subset",
    "learn_schema",
    "parse_dtd",
    "read_dtd",
]
