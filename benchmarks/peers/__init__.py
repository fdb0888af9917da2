"""Other NLU approaches measured side by side with nlu_engine, each in its own venv (never a
dependency of nlu_engine): ``setfit_fewshot``, and ``make_shots`` that draws the N-shot files."""
