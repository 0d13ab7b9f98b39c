"""The engine: run one (setup, grid) trial and store its result, for every command.

sweep, bisect (env and versions), search and bench open a :class:`Session` with
:func:`open_session` and call :func:`run_trial` (or :func:`run_trials` for a planned
batch, which packs runs side by side and calls ``run_trial`` for each). None of them
builds a launch or opens a result store itself, so every command gets the warm pool,
packing, resume by run key and the same stored fields (``sweep_id``, ``host``).
"""

from envmatrix.engine.session import Session, open_session, open_store_at
from envmatrix.engine.trial import Trial, TrialProgress, run_trial, run_trials

__all__ = ["Session", "Trial", "TrialProgress", "open_session", "open_store_at", "run_trial", "run_trials"]
