"""python -m bench NAME [--repeat N] [--quick]

Fresh ``xcep`` processes are timed as an installed package runs: from compiled
bytecode. Where the environment says not to write it (``PYTHONDONTWRITEBYTECODE``,
as on the shared machines), every process would compile xcep's modules from source
(about 0.1 s each); the bench compiles them once and lets the processes read them.
"""

import argparse
import compileall
import os
from pathlib import Path

from bench import (
    events,
    formats,
    serve,
    spark,
    spark_scale,
    streaming_state,
    xpush,
    xpush_families,
    xquery,
    xquery_stream,
    xscl,
    xscl_stream,
    xseq,
    xseq_automaton,
    xseq_memory,
    xseq_multi,
    xseq_opt,
    xseq_paths,
    xseq_queries,
    xseq_runtimes,
    xseq_selection,
    xseq_xpath,
)

BENCHMARKS = {
    "events": events.run,
    "formats": formats.run,
    "xpush": xpush.run,
    "xpush-kernels": xpush.run_kernels,
    "xpush-families": xpush_families.run,
    "xseq": xseq.run,
    "xseq-cep": xseq.run_cep,
    "xseq-opt": xseq_opt.run,
    "xseq-automaton": xseq_automaton.run,
    "xseq-runtimes": xseq_runtimes.run,
    "xseq-multi": xseq_multi.run,
    "xseq-memory": xseq_memory.run,
    "xseq-xpath": xseq_xpath.run,
    "xseq-paths": xseq_paths.run,
    "xseq-queries": xseq_queries.run,
    "xseq-selection": xseq_selection.run,
    "xquery": xquery.run,
    "xquery-stream": xquery_stream.run,
    "serve": serve.run,
    "xscl": xscl.run,
    "xscl-stream": xscl_stream.run,
    "spark": spark.run,
    "streaming-state": streaming_state.run,
    "spark-1gb": spark.run_big,
    "spark-scale": spark_scale.run,
    "spark-10gb": spark_scale.run_10gb,
}

parser = argparse.ArgumentParser(prog="python -m bench")
parser.add_argument("name", choices=sorted(BENCHMARKS))
parser.add_argument("--repeat", type=int, default=5)
parser.add_argument("--quick", action="store_true", help="small inputs, for a smoke run")
args = parser.parse_args()
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
compileall.compile_dir(Path(__file__).resolve().parents[1] / "src" / "xcep", quiet=1)
BENCHMARKS[args.name](repeat=args.repeat, quick=args.quick)
