"""Coverage-guided fuzzing of the readers with atheris (``make fuzz TARGET=name SECONDS=n``).

One module a target: ``yaml_data``, ``markdown_data`` and ``json_data`` (the training-data
readers), ``config``, ``archive`` and ``parse_request`` (the JSON of ``/model/parse`` and its batch
form). ``python -m fuzz`` lists them,
``python -m fuzz TARGET [SECONDS]`` builds its seed corpus from ``data/``, the examples and
``../shared/datasets`` and runs it under libFuzzer; crashes land in ``results/fuzz/TARGET/``. What
counts as a crash: any exception but the project's one-line ``NLUError`` (or an HTTP 4xx).
"""
