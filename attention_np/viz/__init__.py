"""Plots (matplotlib is imported only in this package): ``pip install "attention-np[plots]"``."""
