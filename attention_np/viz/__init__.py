"""Plots (matplotlib is imported only in this package): the ``[plots]`` extra,
``pip install "matplotlib>=3.7"``."""
