"""envmatrix: NCCL environment-configuration fuzzer and regression bisector."""

__version__ = "0.1.0"
