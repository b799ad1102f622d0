"""The version, in one place: read by ``pyproject.toml`` (setuptools' ``attr``) and by ``vitlab.__version__``."""

__version__ = "0.2.0"
