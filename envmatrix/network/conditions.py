"""A network condition (rate, delay with jitter, loss; egress, optionally ingress), parsed and validated up front.

Pure: no sockets, no kernel. Like tcconfig's NetemParameter every value is checked for its unit and range before
anything is applied, and a set that would apply nothing is refused naming the keys that would. Two spellings:
``"delay=5ms,rate=2gbit"`` (the command line) and ``{delay: 5ms, rate: 2gbit, jitter: 1ms, loss: 0.1%,
ingress: true}`` (a config). An empty spec (``{}``, ``""``) is the unshaped condition.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass
from typing import Any, Mapping, Optional

from envmatrix.errors import ConfigError, did_you_mean

DEFAULT_NAME = "default"
KEYS = ("rate", "delay", "jitter", "loss", "ingress", "interface")
EFFECTIVE_KEYS = ("rate", "delay", "loss")  # the keys that make a condition do something

# tc's units: decimal (1 kbit = 1000 bit/s). Byte units ("bps", "mbps") are refused on purpose: tc reads them
# as bytes per second and tcconfig as bits, so either reading would surprise half the users.
_RATE_UNITS = {"bit": 1, "kbit": 10**3, "mbit": 10**6, "gbit": 10**9, "tbit": 10**12}
_TIME_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0}
# htb's rate table holds u32 scheduler ticks per packet size up to 2 KiB: below 8 bytes per second they overflow
# (rate=8bit was accepted, then pyroute2 raised struct.error with a traceback, exit 1, a store written)
MIN_RATE_BPS = 64
MAX_RATE_BPS = 10**12  # 1 tbit: above any NIC these conditions emulate
MAX_TIME_S = 10.0  # a delay or jitter beyond this stalls every collective into its timeout
_NUMBER = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?|\.[0-9]+)\s*([A-Za-z%]*)\s*$")
_IFNAME = re.compile(r"^[A-Za-z0-9_.:@-]{1,15}$")  # IFNAMSIZ - 1, no '/' or whitespace


@dataclass(frozen=True)
class Condition:
    """One named condition. ``rate_bps`` None = no rate limit; zero delay/jitter/loss = not applied."""

    name: str
    rate_bps: Optional[int] = None
    delay_s: float = 0.0
    jitter_s: float = 0.0
    loss_pct: float = 0.0
    ingress: bool = False
    interface: Optional[str] = None

    @property
    def shaped(self) -> bool:
        return self.rate_bps is not None or self.delay_s > 0 or self.loss_pct > 0

    @property
    def needs_netem(self) -> bool:
        """Delay, jitter and loss are netem's (sch_netem); a rate alone is htb's."""
        return self.delay_s > 0 or self.jitter_s > 0 or self.loss_pct > 0

    def describe(self) -> str:
        """The canonical value string (stable: run keys and stored rows carry it); ``unshaped`` for none."""
        parts = []
        if self.rate_bps is not None:
            parts.append(f"rate={format_rate(self.rate_bps)}")
        if self.delay_s > 0:
            parts.append(f"delay={format_time(self.delay_s)}")
        if self.jitter_s > 0:
            parts.append(f"jitter={format_time(self.jitter_s)}")
        if self.loss_pct > 0:
            parts.append(f"loss={self.loss_pct:g}%")
        if self.ingress:
            parts.append("ingress=true")
        if self.interface:
            parts.append(f"interface={self.interface}")
        return ",".join(parts) if parts else "unshaped"

    def min_transfer_s(self, nbytes: int) -> Optional[float]:
        """S/R: the least time ``nbytes`` can take through this rate (None without a rate)."""
        return None if self.rate_bps is None else nbytes * 8 / self.rate_bps

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Condition":
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


def unshaped(name: str = DEFAULT_NAME) -> Condition:
    return Condition(name=name)


def format_rate(bps: int) -> str:
    for unit in ("tbit", "gbit", "mbit", "kbit"):
        if bps % _RATE_UNITS[unit] == 0:
            return f"{bps // _RATE_UNITS[unit]}{unit}"
    return f"{bps}bit"


def format_time(seconds: float) -> str:
    us = round(seconds * 1e6)
    if us % 1000 == 0:
        return f"{us // 1000}ms"
    return f"{us}us"


def parse_condition(name: str, spec: Any, where: str) -> Condition:
    """``spec`` (a ``k=v,...`` string or a mapping) as the condition ``name``; ConfigError naming ``where``."""
    _check_name(name, where)
    fields = _fields(spec, where)
    unknown = [k for k in fields if k not in KEYS]
    if unknown:
        key = unknown[0]
        raise ConfigError(f"{where}: unknown key {key!r}{did_you_mean(key, KEYS)}; allowed: {', '.join(KEYS)}")
    if not fields:
        _check_name_is_not_another_value(name, unshaped(name).describe(), where)
        return unshaped(name)
    rate = _rate(fields["rate"], f"{where}.rate") if "rate" in fields else None
    delay = _time(fields["delay"], f"{where}.delay") if "delay" in fields else 0.0
    jitter = _time(fields["jitter"], f"{where}.jitter") if "jitter" in fields else 0.0
    loss = _loss(fields["loss"], f"{where}.loss") if "loss" in fields else 0.0
    ingress = _bool(fields["ingress"], f"{where}.ingress") if "ingress" in fields else False
    interface = _interface(fields["interface"], f"{where}.interface") if "interface" in fields else None
    if jitter > 0 and delay <= 0:
        raise ConfigError(f"{where}.jitter={fields['jitter']!r}: jitter needs a delay; set delay too (e.g. delay=5ms,jitter=1ms)")
    condition = Condition(name, rate, delay, jitter, loss, ingress, interface)
    _check_name_is_not_another_value(name, condition.describe(), where)
    if name == DEFAULT_NAME and condition.shaped:
        # tables and run keys read 'default' as the unshaped run
        raise ConfigError(f"{where}: the name {DEFAULT_NAME!r} is the unshaped condition; allowed: another name for "
                          f"{condition.describe()}")
    if not condition.shaped:
        given = ", ".join(f"{k}={fields[k]}" for k in fields)
        raise ConfigError(f"{where}: {given} applies nothing; set one of {', '.join(EFFECTIVE_KEYS)} "
                          "(or leave the condition empty, {}, for no shaping)")
    return condition


def parse_network_axis(mapping: Any, where: str) -> dict[str, Condition]:
    """The ``network:`` axis: name -> condition, in order. None or ``{}`` is the one unshaped ``default``."""
    if mapping is None or (isinstance(mapping, Mapping) and not mapping):
        return {DEFAULT_NAME: unshaped()}
    if not isinstance(mapping, Mapping):
        raise ConfigError(f"{where}: {mapping!r} is not a mapping; write name: {{rate: 1gbit, delay: 5ms}} per condition")
    conditions = {}
    for name, spec in mapping.items():
        conditions[str(name)] = parse_condition(str(name), spec, f"{where}.{name}")
    return conditions


def _check_name_is_not_another_value(name: str, value: str, where: str) -> None:
    # tables show the name: 'rate=1gbit' naming delay=1ms would read as the other condition
    if "=" in name and name != value:
        raise ConfigError(f"{where}: the name {name!r} reads as a condition but this one is {value}; allowed: a name "
                          f"without '=' (e.g. b1), or no name")


def _check_name(name: Any, where: str) -> None:
    # The name becomes part of run keys and table rows: the path-safe characters, like setup names.
    if not isinstance(name, str) or not re.match(r"^[A-Za-z0-9_][A-Za-z0-9_.+=,@-]{0,99}$", name):
        raise ConfigError(f"{where}: condition name {name!r} not allowed; use letters, digits and _ . + = , @ - "
                          "(at most 100, not starting with . or -)")


def _fields(spec: Any, where: str) -> dict[str, Any]:
    if spec is None:
        return {}
    if isinstance(spec, Mapping):
        return {str(k): v for k, v in spec.items()}
    if not isinstance(spec, str):
        raise ConfigError(f"{where}: {spec!r} is neither 'key=value,...' nor a mapping; e.g. 'delay=5ms,rate=2gbit'")
    fields: dict[str, Any] = {}
    text = spec.strip()
    if text in ("", DEFAULT_NAME, "unshaped", "none"):
        return {}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key or not value.strip():
            raise ConfigError(f"{where}: {item.strip()!r} is not key=value; write e.g. 'delay=5ms,rate=2gbit' "
                              f"(keys: {', '.join(KEYS)})")
        if key in fields:
            raise ConfigError(f"{where}: {key!r} given twice in {spec!r}; give each key once")
        fields[key] = value.strip()
    return fields


def _number(value: Any, where: str, units: Mapping[str, float], example: str, bare: Optional[str] = None) -> float:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ConfigError(f"{where}={value!r}: not a quantity; write a number with a unit ({', '.join(units)}), e.g. {example}")
    if isinstance(value, (int, float)):
        number, unit = float(value), ""
    else:
        match = _NUMBER.match(value)
        if not match:
            raise ConfigError(f"{where}={value!r}: not a quantity; write a number with a unit ({', '.join(units)}), e.g. {example}")
        number, unit = float(match.group(1)), match.group(2).lower()
    if not unit and bare is not None:
        unit = bare
    if unit not in units:
        got = f"unit {unit!r}" if unit else "no unit"
        raise ConfigError(f"{where}={value!r}: {got}; allowed units: {', '.join(units)} (e.g. {example})")
    if not math.isfinite(number):
        raise ConfigError(f"{where}={value!r}: not a finite number; e.g. {example}")
    return number * units[unit]


def _rate(value: Any, where: str) -> int:
    bps = _number(value, where, _RATE_UNITS, "2gbit")
    if not MIN_RATE_BPS <= bps <= MAX_RATE_BPS:
        raise ConfigError(f"{where}={value!r}: out of range; allowed: {format_rate(MIN_RATE_BPS)} to 1tbit")
    return int(round(bps))


def _time(value: Any, where: str) -> float:
    seconds = _number(value, where, _TIME_UNITS, "5ms")
    if not 0 <= seconds <= MAX_TIME_S or (0 < seconds < 1e-6):
        raise ConfigError(f"{where}={value!r}: out of range; allowed: 0 or 1us to 10s")
    return round(seconds, 6)


def _loss(value: Any, where: str) -> float:
    pct = _number(value, where, {"%": 1.0}, "0.1%", bare="%")
    if not 0 <= pct <= 100:
        raise ConfigError(f"{where}={value!r}: out of range; allowed: 0% to 100%")
    return pct


def _bool(value: Any, where: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "yes", "1", "on"):
        return True
    if text in ("false", "no", "0", "off"):
        return False
    raise ConfigError(f"{where}={value!r}: not a boolean; allowed: true, false")


def _interface(value: Any, where: str) -> str:
    if not isinstance(value, str) or not _IFNAME.match(value):
        raise ConfigError(f"{where}={value!r}: not an interface name; allowed: 1-15 of letters, digits and _ . : @ - "
                          "(e.g. eth0)")
    return value
