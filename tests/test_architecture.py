"""The package layout ARCHITECTURE.md describes: envmatrix/ holds packages and a few small shared modules only."""

from __future__ import annotations

from pathlib import Path

import envmatrix

# Top-level modules every layer may import (the bottom of .importlinter's layers); anything else at the top
# of envmatrix/ belongs in a package of its layer (a command in cli/, orchestration in app/, and so on).
SHARED_MODULES = {
    "__init__.py",  # the version
    "__main__.py",  # python -m envmatrix
    "errors.py",  # the error types and exit codes of every command
    "results.py",  # the one result schema
    "paths.py",  # where packaged data is found and outputs go
    "registry.py",  # the one plugin registry of every family
}


def test_top_level_holds_only_packages_and_the_shared_modules():
    root = Path(envmatrix.__file__).parent
    modules = {p.name for p in root.glob("*.py")}
    assert modules - SHARED_MODULES == set(), "move these into the package of their layer (see ARCHITECTURE.md)"
    assert SHARED_MODULES - modules == set(), "a shared module is gone: drop it from SHARED_MODULES"
    packages = [p for p in root.iterdir() if p.is_dir() and not p.name.startswith(("_", "."))]
    assert packages and all((p / "__init__.py").is_file() for p in packages), "every package has an __init__.py"
