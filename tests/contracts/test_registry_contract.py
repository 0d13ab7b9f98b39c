"""Every plugin family registers through envmatrix.registry: same duplicate and unknown-name behaviour everywhere."""

from __future__ import annotations

import pytest

from envmatrix.errors import ConfigError
from envmatrix.registry import Registry


def _families():
    from envmatrix.launchers import base as launchers
    from envmatrix.probes import base as probes
    from envmatrix.reporting import formats
    from envmatrix.search import study
    from envmatrix.store import base as stores
    from envmatrix.strategies import base as strategies

    return {
        "launcher": launchers._REGISTRY,
        "probe": probes._REGISTRY,
        "strategy": strategies._REGISTRY,
        "store": stores._SCHEMES,
        "report format": formats._FORMATS,
        "search sampler": study._SAMPLERS,
    }


FAMILIES = _families()


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_family_uses_the_shared_registry(family):
    registry = FAMILIES[family]
    assert isinstance(registry, Registry) and registry.names(), f"{family}: nothing registered"


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_unknown_name_is_one_line_with_suggestion_and_allowed_list(family):
    registry = FAMILIES[family]
    first = registry.names()[0]
    with pytest.raises(ConfigError) as err:
        registry.get(first + "x", "where")
    message = str(err.value)
    assert "\n" not in message and message.startswith("where: unknown ")
    assert f"(did you mean {first}?)" in message and "allowed: " + ", ".join(registry.names()) in message


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_duplicate_registration_is_refused_and_leaves_the_original(family):
    registry = FAMILIES[family]
    name = registry.names()[0]
    original = registry.get(name, "where")
    registry.add(name, original)  # the same implementation again (a module imported twice) is harmless
    with pytest.raises(ValueError, match=f"{name!r} is already registered"):
        registry.add(name, object())
    assert registry.get(name, "where") is original


def test_names_are_sorted_and_a_non_string_name_is_unknown():
    registry: Registry[int] = Registry("widget")
    registry.add("b", 2)
    registry.add("a", 1)
    assert registry.names() == ("a", "b") and list(registry) == ["a", "b"] and "a" in registry
    with pytest.raises(ConfigError, match="unknown widget 3"):
        registry.get(3, "where")
    with pytest.raises(ValueError, match="non-empty name"):
        registry.add("", 0)
