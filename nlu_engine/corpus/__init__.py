"""Corpus parsing: a file of messages in, one parse per row out (``nlu-engine parse --input``).

- ``formats``: input formats (text, JSONL, CSV, Parquet), cutting a file into chunks, reading
  a chunk's records (a row that cannot be parsed is a record with an error);
- ``output``: the output rows and the file they go to (JSONL or Parquet), written atomically;
- ``parsing``: the unit of work (a group of rows parsed as one batch) and running a job in this
  process or in local worker processes. Ray runs the same units: ``nlu_engine.distributed``.
"""
