"""`envmatrix bench --help` states the default of each size-sweep flag, and states it right (a new user's QA pass):
the figures are read from the parser's help and compared with the bench defaults the probe really applies."""

from __future__ import annotations

import argparse
import re

import pytest

from envmatrix.bench.sizes import DTYPE_BYTES
from envmatrix.cli import build_parser
from envmatrix.probes.builtin import BENCH_DEFAULTS
from envmatrix.values import size


def bench_help() -> dict[str, str]:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return {a.dest: a.help or "" for a in sub.choices["bench"]._actions}


@pytest.mark.parametrize("dest, key, read", [
    ("min_bytes", "min_bytes", lambda text: size("-b", text)),
    ("factor", "factor", float),
    ("iters", "iters", int),
    ("warmup", "warmup", int),
    ("dtype", "dtype", str),
])
def test_each_stated_default_is_the_applied_one(dest, key, read):
    text = bench_help()[dest]
    stated = re.search(r"\(default ([^;),]+)", text)
    assert stated, f"bench --help: {dest}: {text!r} states no default"
    assert read(stated.group(1)) == BENCH_DEFAULTS[key], f"bench --help says {stated.group(1)}, the bench applies " \
                                                         f"{BENCH_DEFAULTS[key]!r}"


def test_dtype_help_names_every_dtype():
    assert all(name in bench_help()["dtype"] for name in DTYPE_BYTES)
