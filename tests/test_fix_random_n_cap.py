"""``kind: random`` with a huge ``n`` is refused up front, like a product past the same cap: before, n=2,000,000 over a
60M-row space drew rows for minutes and built millions of setups before any probe ran (a typo'd n hung the sweep)."""

import time

import pytest

from envmatrix.errors import ConfigError
from envmatrix.strategies import expand_setups
from envmatrix.strategies.base import MAX_SETUPS
from test_strategies import VALUES

HUGE = {f"V{i}": [str(j) for j in range(6)] for i in range(10)}  # 60M rows


def test_random_n_past_the_cap_is_a_one_line_error_naming_the_key():
    t0 = time.monotonic()
    with pytest.raises(ConfigError) as err:
        expand_setups(None, [{"kind": "random", "vars": HUGE, "n": 2_000_000}], VALUES)
    assert time.monotonic() - t0 < 1.0
    message = str(err.value)
    assert "\n" not in message and ".n: 2000000" in message and f"<= {MAX_SETUPS}" in message


def test_random_n_at_the_cap_and_product_share_one_cap():
    setups = expand_setups(None, [{"kind": "random", "vars": {"V0": ["0", "1"]}, "n": MAX_SETUPS}], VALUES)
    assert len(setups) == 2  # n larger than the space still means all of it
    with pytest.raises(ConfigError, match=f"more than {MAX_SETUPS}"):
        expand_setups(None, [{"kind": "product", "vars": {k: HUGE[k] for k in list(HUGE)[:6]}}], VALUES)
