"""Parity with Rasa 3.6: the same data, configs and reports through both engines."""
