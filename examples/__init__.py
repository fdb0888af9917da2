"""Examples that ship with nlu_engine (importable from the project root)."""
