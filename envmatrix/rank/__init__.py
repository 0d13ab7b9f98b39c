"""What runs inside rank processes: the built-in probe's rank (``python -m envmatrix.rank.main``), its bench
engine and direct NCCL launches, the mpi probe's rank (``python -m envmatrix.rank.mpi_main``) and where a rank runs.

Imports nothing of the driver (stdlib, torch or mpi4py, and the shared boundary/errors/results modules plus
the bench model's collectives table; .importlinter checks it), and the driver never imports it: torch lives here.
"""
