"""Custom pipeline components: name them in config.yml by their import path."""
