"""Parse NVIDIA nccl-tests output: the stdout table and the ``-J file.json`` report.

Pure: text in, :class:`NcclTestsReport` out; no file or process access.  Checked
against the nccl-tests v2.19.6 sources (``src/util.cu``, ``src/common.cu``,
``src/common.h``).

One module per concern: ``records`` (the records and program naming), ``table`` (one fixed-width
table row), ``stdout`` (a whole stdout stream, with the printf formats it relies on), ``json_report``
(the ``-J`` JSON file, with its format). This package's names are the public interface.
"""

from envmatrix.parsers.nccl_tests.json_report import parse_json
from envmatrix.parsers.nccl_tests.records import (
    COLLECTIVE_OF_BINARY,
    SOURCE,
    NcclTestsReport,
    NcclTestsRow,
    collective_of,
    decode_nccl_version,
)
from envmatrix.parsers.nccl_tests.stdout import looks_like_nccl_tests, parse_stdout

__all__ = [
    "COLLECTIVE_OF_BINARY",
    "SOURCE",
    "NcclTestsReport",
    "NcclTestsRow",
    "collective_of",
    "decode_nccl_version",
    "looks_like_nccl_tests",
    "parse_json",
    "parse_stdout",
]
