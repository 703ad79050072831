"""What the tests and benchmarks compare the engines with, not part of the engines' API:
``xseq_reference.evaluate`` (XSeq's slow tree-walking reference evaluator) and
``xscl_sequential.SequentialEngine`` (the seed's Sequential baseline for XSCL: each
query joined on its own)."""
