"""``nlu-engine review``: the messages ``serve --log-messages`` logged, ranked, grouped and labelled
in a local web page, the decisions kept in the log's database and written back as Rasa YAML.

One file a job: ``decisions`` (the decisions' tables, versioned so two reviewers never overwrite
each other), ``grouping`` (near-duplicates), ``ranking`` (what a review helps most), ``inbox``
(the groups the page shows), ``writeback`` (``reviewed.yml``, written atomically), ``compare``
(what a new model fixes and breaks), ``app`` (the Starlette app) and ``static/`` (the page).
Starlette and SQLAlchemy are imported only by the modules that use them.
"""
