"""The ``network:`` axis of a config (and ``--network`` on the command line) with its ``network_options:``.

``network: {default: {}, d5_b2: {delay: 5ms, rate: 2gbit}}`` gives each (setup, grid) run once per condition;
``network_options: {interface: eth1, allow_default_route: false, ingress: false}`` fills what a condition leaves
unset (a condition's own ``interface``/``ingress`` win). Parsing only: ``shaping.check_applicable`` refuses what
this kernel or host cannot apply, before anything launches (app/network_axis.py).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

from envmatrix.errors import ConfigError, did_you_mean
from envmatrix.network.conditions import Condition, parse_condition, parse_network_axis

OPTION_KEYS = ("interface", "allow_default_route", "ingress")


@dataclass(frozen=True)
class NetworkOptions:
    interface: Optional[str] = None  # real clusters: the interface to shape on each host (emulated hosts: eth0)
    allow_default_route: bool = False  # shaping the default-route interface cuts people off: refused unless true
    ingress: bool = False  # shape what each host receives too (an ifb device), as seed 000 did


def parse_options(mapping: Any, where: str) -> NetworkOptions:
    if mapping is None:
        return NetworkOptions()
    if not isinstance(mapping, Mapping):
        raise ConfigError(f"{where}: {mapping!r} is not a mapping; allowed keys: {', '.join(OPTION_KEYS)}")
    for key in mapping:
        if key not in OPTION_KEYS:
            raise ConfigError(f"{where}: unknown key {key!r}{did_you_mean(str(key), OPTION_KEYS)}; "
                              f"allowed: {', '.join(OPTION_KEYS)}")
    for key in ("allow_default_route", "ingress"):
        if key in mapping and not isinstance(mapping[key], bool):
            raise ConfigError(f"{where}.{key}={mapping[key]!r}: not a boolean; allowed: true, false")
    interface = mapping.get("interface")
    if interface is not None:
        # the interface rules are the condition's: parse a one-key condition for its check
        interface = parse_condition("x", {"rate": "1gbit", "interface": interface}, where).interface
    return NetworkOptions(interface, bool(mapping.get("allow_default_route", False)), bool(mapping.get("ingress", False)))


def parse_flags(items: Sequence[str], flag: str = "--network") -> dict[str, Condition]:
    """``--network 'delay=5ms,rate=2gbit'`` (named by its value) or ``--network d5_b2:delay=5ms,rate=2gbit``;
    ``--network default`` is the unshaped run. Repeatable; order kept."""
    out: dict[str, Condition] = {}
    for item in items:
        name, sep, spec = item.partition(":")
        if not sep:
            name, spec = "", item
        if not spec.strip():
            raise ConfigError(f"{flag} {item!r}: no condition given; allowed: [NAME:]SPEC such as rate=1gbit or "
                              "d5:delay=5ms, or default (unshaped)")
        condition = parse_condition(name or "x", spec, f"{flag} {item!r}")
        if not name:
            name = "default" if not condition.shaped else condition.describe()
        condition = dataclasses.replace(condition, name=name)
        if name in out:
            raise ConfigError(f"{flag} {item!r}: condition {name!r} given twice; give each condition once")
        out[name] = condition
    return out


def network_axis(mapping: Any, options: NetworkOptions, where: str) -> tuple[Condition, ...]:
    """The axis' conditions with the options filled in; two conditions with the same value are refused (they
    would be one measurement under two names)."""
    conditions = mapping if isinstance(mapping, dict) and all(isinstance(c, Condition) for c in mapping.values()) \
        else parse_network_axis(mapping, where)
    seen: dict[str, str] = {}
    out = []
    for name, condition in conditions.items():
        if condition.shaped:
            condition = dataclasses.replace(condition, interface=condition.interface or options.interface,
                                            ingress=condition.ingress or options.ingress)
        value = condition.describe()
        if value in seen:
            raise ConfigError(f"{where}.{name}: {value} is the same condition as {seen[value]}; "
                              "give each condition once")
        seen[value] = name
        out.append(condition)
    return tuple(out)
