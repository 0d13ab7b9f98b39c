"""Reports: the seed-003 matrix (pure model) rendered as Markdown, JSON or rich."""

from envmatrix.reporting.matrix import Matrix, build_matrix
from envmatrix.reporting.formats import get_format, format_names, write_reports

__all__ = ["Matrix", "build_matrix", "get_format", "format_names", "write_reports"]
