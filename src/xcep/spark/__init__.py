"""xcep pipelines on Apache Spark (PySpark): every engine, batch and streaming.

Needs the ``spark`` extra. (Being built: issue 8.)
"""
