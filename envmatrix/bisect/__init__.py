"""Bisect a failing environment down to its culprit atoms.

The public entry point is ``find_culprits`` (``envmatrix.bisect.culprits``: its docstring says how a caller that
is not bisecting an env, e.g. localising bad hosts or bad host pairs, uses it) with the outcomes ``PASS``,
``FAIL``, ``UNRESOLVED`` and the certify levels ``EXPLAIN``, ``STRICT``. They are loaded on first use, so
importing a light submodule (``envmatrix.bisect.versions``) does not import numpy.
"""

from __future__ import annotations

import importlib
from typing import Any

_PUBLIC = {"find_culprits": "culprits", "CulpritResult": "culprits", "HypothesisClass": "posterior",
           "PASS": "probe_cache", "FAIL": "probe_cache", "UNRESOLVED": "probe_cache",
           "EXPLAIN": "certificates", "STRICT": "certificates"}
__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> Any:
    if name not in _PUBLIC:
        raise AttributeError(f"module 'envmatrix.bisect' has no attribute {name!r}")
    return getattr(importlib.import_module(f"envmatrix.bisect.{_PUBLIC[name]}"), name)
