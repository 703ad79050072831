"""Schema facts (DTDs) used by the optimizers of the engines."""

from xcep.schema.dtd import Dtd, DtdError, parse_dtd, read_dtd
from xcep.schema.learn import LearnedSchema, learn_schema

__all__ = ["Dtd", "DtdError", "LearnedSchema", "learn_schema", "parse_dtd", "read_dtd"]
