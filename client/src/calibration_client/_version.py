"""The package's version: one place, read by setuptools and sent in ``User-Agent``."""

__version__ = "0.1.0"
