"""Result stores: every probe result is committed the moment it finishes."""

from envmatrix.store.base import ResultStore, open_store
from envmatrix.store import sqlite as _sqlite  # noqa: F401  (registers sqlite)

__all__ = ["ResultStore", "open_store"]
