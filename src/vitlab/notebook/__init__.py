"""vitlab in a notebook: the Python calls that mirror the commands (:mod:`~vitlab.notebook.api`, also at the top
level: ``vitlab.run``, ``vitlab.compare``, ``vitlab.evaluate``, ``vitlab.predict``, ``vitlab.explain``,
``vitlab.load``) and the rich displays of what they return (:mod:`~vitlab.notebook.display`), registered with
IPython when ``vitlab`` is imported there.

A layer above the others (it calls tasks, experiments and explain, as the command line does); nothing below it
imports it.
"""

from .api import compare, evaluate, explain, load, predict, run, run_folder
from .display import RunFolder, register

__all__ = ["RunFolder", "compare", "evaluate", "explain", "load", "predict", "register", "run", "run_folder"]
