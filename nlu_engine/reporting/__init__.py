"""Plots and the HTML page of ``nlu-engine test`` (matplotlib is imported only when plotting)."""
