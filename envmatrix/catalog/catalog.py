"""The variable catalog: which env variables exist, what values they take.

Setups and sweeps are checked against it before anything is launched, so a typo
(``NCCL_NET_GDR_LEVL``) or an impossible value (``NCCL_NTHREADS=100``) is a
one-line ConfigError instead of a silent no-op that a bisect would then "find".
The catalog files are YAML under ``search_spaces/``; see nccl.yaml for the format.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Iterator, Mapping, Sequence

import yaml

from envmatrix.catalog.domains import Domain, PathListDomain, literal, parse_domain
from envmatrix.env.atoms import PATH_OPS, SET, UNSET, Atom, Setup
from envmatrix.errors import ConfigError, did_you_mean
from envmatrix.paths import search_spaces_dir

SEARCH_SPACES_DIR = search_spaces_dir()

# Prefixes the catalogs claim to cover; an unknown name here is most likely a typo.
CATALOG_FAMILIES = ("NCCL_", "FI_", "GLOO_", "TORCH_", "NVSHMEM_", "CUDA_", "UCX_")

_VAR_RE = re.compile(r"[A-Z_][A-Z0-9_]*")
_REQUIRED = ("domain", "since", "meaning")
_OPTIONAL = ("default", "pinned", "multi_node_only", "examples", "deprecated")


def catalog_family(var: str) -> str | None:
    """The catalog prefix ``var`` belongs to (``"NCCL_"``), or None."""
    return next((p for p in CATALOG_FAMILIES if var.startswith(p)), None)


@dataclass(frozen=True)
class VarSpec:
    name: str
    domain: Domain
    default: str | None
    since: str | None
    meaning: str
    pinned: bool = False
    multi_node_only: bool = False
    catalog: str = ""
    examples: tuple[str, ...] = ()
    deprecated: str | None = None


class Catalog:
    """Immutable set of VarSpecs, keyed by variable name."""

    __slots__ = ("_specs",)

    def __init__(self, specs: Mapping[str, VarSpec]):
        object.__setattr__(self, "_specs", MappingProxyType(dict(sorted(specs.items()))))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Catalog is immutable")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._specs)

    @property
    def pinned(self) -> tuple[str, ...]:
        """Variables no strategy may vary (safety pins such as NCCL_NVLS_ENABLE)."""
        return tuple(n for n, s in self._specs.items() if s.pinned)

    def spec(self, var: str) -> VarSpec | None:
        return self._specs.get(var)

    def __contains__(self, var: object) -> bool:
        return var in self._specs

    def __iter__(self) -> Iterator[str]:
        return iter(self._specs)

    def __len__(self) -> int:
        return len(self._specs)

    def suggest(self, var: str) -> str:
        """`` (did you mean X?)`` from the same prefix family when there is one."""
        if var.upper() in self._specs and var.upper() != var:
            return f" (did you mean {var.upper()}?)"
        family = catalog_family(var)
        pool = [n for n in self._specs if family and n.startswith(family)] or list(self._specs)
        return did_you_mean(var, pool)

    def unknown_message(self, var: str, where: str) -> str:
        prefix = f"{where}: " if where else ""
        return (f"{prefix}unknown variable {var}{self.suggest(var)}; use a catalogued name "
                "or pass --allow-unknown-vars for site-specific variables")

    def _require(self, var: str, where: str) -> VarSpec:
        spec = self._specs.get(var)
        if spec is None:
            raise ConfigError(self.unknown_message(var, where))
        return spec

    def values(self, var: str, where: str = "") -> list[str]:
        """Values to try for ``values: all``: the closed set, else the catalog examples."""
        spec = self._require(var, where)
        found = spec.domain.enumerate()
        if found is not None:
            return found
        if spec.examples:
            return list(spec.examples)
        prefix = f"{where}: " if where else ""
        raise ConfigError(f"{prefix}{var} takes {spec.domain.describe()} and its catalog ({spec.catalog}) "
                          "gives no examples; list the values to try explicitly")

    def canonical(self, var: str, value: str) -> str:
        """``value`` with aliases resolved (``NCCL_NET_GDR_LEVEL=3`` -> ``PHB``)."""
        spec = self._specs.get(var)
        return value if spec is None else spec.domain.canonical(value)

    def check_value(self, var: str, value: str, where: str) -> None:
        spec = self._require(var, where)
        if not spec.domain.contains(value):
            raise ConfigError(f"{where}: value {value!r} for {var} is not allowed; "
                              f"allowed: {spec.domain.describe()}")

    def validate_atom(self, atom: Atom, where: str, allow_unknown: bool) -> None:
        """Check one atom; ``where`` already names the variable (``...setups.0.NCCL_X``)."""
        if atom.op not in (SET, UNSET, *PATH_OPS):
            raise ConfigError(f"{where}: op {atom.op!r} not allowed; allowed: set, unset, prepend, append")
        spec = self._specs.get(atom.var)
        if spec is None:
            if allow_unknown:
                return
            raise ConfigError(self.unknown_message(atom.var, where))
        if atom.op == UNSET:
            return
        if atom.op in PATH_OPS and not isinstance(spec.domain, PathListDomain):
            raise ConfigError(f"{where}: {atom.op} is only allowed for path lists (e.g. LD_LIBRARY_PATH); "
                              f"{atom.var} takes {spec.domain.describe()}, so set one value")
        self.check_value(atom.var, atom.value, where)

    def validate_setup(self, setup: Setup, where: str, allow_unknown: bool) -> None:
        """Check every atom; each error names ``{where}.{VAR}``."""
        for atom in setup.atoms:
            self.validate_atom(atom, f"{where}.{atom.var}", allow_unknown)


# ---------------------------------------------------------------------- loading


class _UniqueKeyLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """SafeLoader that refuses duplicate keys (PyYAML silently keeps the last one); libyaml's parser where PyYAML
    has it (the catalogs parse ~9x faster: every command reads them)."""


def _construct_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue  # `<<: *base` is merged by construct_mapping; a key written beside it overrides, as YAML says
        key = loader.construct_object(key_node, deep=deep)
        try:
            hash(key)
        except TypeError:  # `? [a, b]` (a complex key): PyYAML's own message, not a TypeError traceback
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping", node.start_mark, "found unhashable key", key_node.start_mark) from None
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark)
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
UniqueKeyLoader = _UniqueKeyLoader  # config files use it too (duplicate setup names)


def _display(path: Path) -> str:
    """Repo-relative path for messages when possible (``search_spaces/nccl.yaml``)."""
    try:
        return str(path.resolve().relative_to(SEARCH_SPACES_DIR.parent))
    except ValueError:
        return str(path)


def _read_yaml(path: Path, shown: str) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{shown}: cannot read catalog file ({exc.strerror or exc})") from None
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{shown}: not valid YAML{at}: {problem}") from None


def _opt_str(raw: Any, where: str) -> str | None:
    if raw is None:
        return None
    if isinstance(raw, float):
        raise ConfigError(f"{where}: {raw!r} read as a number; quote versions, e.g. \"2.10\"")
    return literal(raw, where)


def _parse_var(name: str, raw: Any, where: str, stem: str) -> VarSpec:
    if not _VAR_RE.fullmatch(name):
        raise ConfigError(f"{where}: {name!r} is not an environment variable name (A-Z, 0-9, _)")
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: expected a mapping with {', '.join(_REQUIRED)}, got {raw!r}")
    missing = [k for k in _REQUIRED if k not in raw]
    if missing:
        raise ConfigError(f"{where}: missing keys {missing}; required: {', '.join(_REQUIRED)} (since may be null)")
    unknown = sorted(str(k) for k in raw if k not in _REQUIRED + _OPTIONAL)
    if unknown:
        raise ConfigError(f"{where}: keys {unknown} not allowed; allowed: {', '.join(_REQUIRED + _OPTIONAL)}")
    domain = parse_domain(raw["domain"], f"{where}.domain")
    meaning = raw["meaning"]
    if not isinstance(meaning, str) or not meaning.strip():
        raise ConfigError(f"{where}.meaning: must be a non-empty string")
    flags = {}
    for key in ("pinned", "multi_node_only"):
        flags[key] = raw.get(key, False)
        if not isinstance(flags[key], bool):
            raise ConfigError(f"{where}.{key}: {flags[key]!r} must be true or false")
    default = _opt_str(raw.get("default"), f"{where}.default")
    if default is not None and not domain.contains(default):
        raise ConfigError(f"{where}.default: {default!r} is not allowed; allowed: {domain.describe()}")
    examples_raw = raw.get("examples") or []
    if not isinstance(examples_raw, list):
        raise ConfigError(f"{where}.examples: expected a list, got {examples_raw!r}")
    examples = tuple(literal(v, f"{where}.examples.{i}") for i, v in enumerate(examples_raw))
    for i, example in enumerate(examples):
        if not domain.contains(example):
            raise ConfigError(f"{where}.examples.{i}: {example!r} is not allowed; allowed: {domain.describe()}")
    return VarSpec(name=name, domain=domain, default=default, since=_opt_str(raw["since"], f"{where}.since"),
                   meaning=meaning.strip(), pinned=flags["pinned"], multi_node_only=flags["multi_node_only"],
                   catalog=stem, examples=examples,
                   deprecated=_opt_str(raw.get("deprecated"), f"{where}.deprecated"))


def _parse_file(path: Path) -> list[VarSpec]:
    shown = _display(path)
    data = _read_yaml(path, shown)
    if not isinstance(data, Mapping) or "variables" not in data:
        raise ConfigError(f"{shown}: expected a mapping with a 'variables:' key")
    unknown = sorted(str(k) for k in data if k not in ("catalog", "source", "variables"))
    if unknown:
        raise ConfigError(f"{shown}: top-level keys {unknown} not allowed; allowed: catalog, source, variables")
    for key in ("catalog", "source"):
        if key in data and not isinstance(data[key], str):
            raise ConfigError(f"{shown}: {key}: must be a string")
    variables = data["variables"]
    if not isinstance(variables, Mapping) or not variables:
        raise ConfigError(f"{shown}: variables: expected a non-empty mapping VAR: {{domain, since, meaning, ...}}")
    return [_parse_var(str(n), raw, f"{shown}: variables.{n}", path.stem) for n, raw in variables.items()]


def load_catalog(paths: Sequence[Path] | None = None) -> Catalog:
    """Load and merge catalog files (default: every ``*.yaml`` in SEARCH_SPACES_DIR)."""
    if paths is None:
        paths = sorted(SEARCH_SPACES_DIR.glob("*.yaml"))
        if not paths:
            raise ConfigError(f"{SEARCH_SPACES_DIR}: no *.yaml catalog files found")
    specs: dict[str, VarSpec] = {}
    origin: dict[str, str] = {}
    for path in map(Path, paths):
        for spec in _parse_file(path):
            if spec.name in specs:
                raise ConfigError(f"{_display(path)}: variables.{spec.name}: already catalogued in "
                                  f"{origin[spec.name]}; each variable belongs to one catalog file")
            specs[spec.name] = spec
            origin[spec.name] = _display(path)
    return Catalog(specs)


@functools.lru_cache(maxsize=1)
def default_catalog() -> Catalog:
    """The shipped catalogs, loaded once per process."""
    return load_catalog()
