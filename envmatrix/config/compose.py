"""Compose a config with Hydra's compose API.

``conf=NAME`` picks conf/NAME(.yaml) or any file path; its content is stored in
Hydra's ConfigStore as the ``conf/selected`` option, so built-in defaults,
the user's file and the command-line overrides compose in that order, and the
typed schema rejects values such as ``max_local_ranks=abc``.
"""

from __future__ import annotations

import contextlib
import functools
import re
from pathlib import Path
from typing import Any, Iterator, Sequence

import yaml

from envmatrix import values
from envmatrix.errors import ConfigError, did_you_mean
from envmatrix.paths import conf_dir

CONF_DIR = conf_dir()
DEFAULT_CONF = "default"


def available_confs() -> list[str]:
    return sorted(p.stem for p in CONF_DIR.glob("*.yaml") if p.stem != "config")


def resolve_conf_file(value: str | None, near: Path | None = None) -> Path:
    """A file path, else a config name looked up next to ``near`` (the including file), then in the packaged conf/."""
    value = value or DEFAULT_CONF
    if "\x00" in value:
        raise ConfigError(f"conf={value!r}: contains a NUL byte; give a file path or a config name")
    candidates = [Path(value).expanduser()]
    if not Path(value).is_absolute():
        for folder in ([near] if near is not None else []) + [CONF_DIR]:
            candidates += [folder / value, folder / f"{value}.yaml"]
    for path in candidates:
        if path.is_file():
            if path.resolve() == (CONF_DIR / "config.yaml").resolve():  # read as a config, its defaults were unknown
                raise ConfigError(f"conf={value}: {path} is the composition file every config is read through, not a "
                                  f"config; allowed: a file path or one of {', '.join(available_confs())}")
            return path.resolve()
    if any(p.is_dir() for p in candidates):
        raise ConfigError(f"conf={value}: is a directory; give a YAML file or one of {', '.join(available_confs())}")
    if any(p.exists() for p in candidates):  # a FIFO or a device: there, but 'no such config file' said it was not
        raise ConfigError(f"conf={value}: is not a regular file (a FIFO, socket or device); give a YAML file or one of "
                          f"{', '.join(available_confs())}")
    stem = Path(value).stem
    raise ConfigError(
        f"conf={value}: no such config file{did_you_mean(stem, available_confs())}; "
        f"allowed: a file path or one of {', '.join(available_confs())} (in {CONF_DIR}; list them with envmatrix configs)"
    )


# The one reader of user-given text files, with its cap; launchers read hostfiles with it too, so it lives in values.
MAX_TEXT_BYTES, read_utf8 = values.MAX_TEXT_BYTES, values.read_utf8


@functools.lru_cache(maxsize=1)  # one loader class for every file a command reads
def _config_loader() -> Any:
    """The catalogs' loader (duplicate keys refused) with Hydra's booleans (only true/false) and plain decimal
    integers. YAML 1.1 also reads on/off/yes/no as booleans and 0x100, 010 (octal), 1_000 and 1:30 (base 60) as
    numbers, so `TORCH_DISTRIBUTED_DEBUG: OFF` became '0', `MY_FLAG: off` was exported as MY_FLAG=0 and `MY_ID: 0123`
    as 83; in a config each stays the text written (a number-valued key still takes 10 or 0x10 as text it parses)."""
    import re

    from envmatrix.catalog.catalog import UniqueKeyLoader

    replaced = ("tag:yaml.org,2002:bool", "tag:yaml.org,2002:int")

    class ConfigLoader(UniqueKeyLoader):  # type: ignore[misc,valid-type]
        yaml_implicit_resolvers = {first: [(tag, rx) for tag, rx in resolvers if tag not in replaced]
                                   for first, resolvers in UniqueKeyLoader.yaml_implicit_resolvers.items()}

    ConfigLoader.add_implicit_resolver("tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
                                       list("tTfF"))
    ConfigLoader.add_implicit_resolver("tag:yaml.org,2002:int", re.compile(r"^[-+]?(?:0|[1-9][0-9]*)$"),
                                       list("-+0123456789"))
    return ConfigLoader


def read_yaml_mapping(path: Path) -> dict[str, Any]:
    """One YAML file as a mapping; duplicate keys (e.g. a setup named twice) and non-UTF-8 text are errors."""
    text = read_utf8(path, str(path), "the config")
    try:
        data = yaml.load(text, Loader=_config_loader())
    except (ValueError, OverflowError) as exc:  # a tag its text cannot hold: seed: !!int abc
        raise ConfigError(f"{path}: malformed YAML ({_one_line(exc)}); fix the tagged value or drop its tag") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{where}: malformed YAML ({problem}); fix the syntax at that line") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: top level is a {type(data).__name__}; allowed: a mapping of config keys")
    return values.plain_tree(str(path), data)


def load_yaml_mapping(path: Path, _chain: tuple[Path, ...] = ()) -> dict[str, Any]:
    """The file's content with its Hydra defaults list applied (``defaults: [aws_ofi, _self_]``).

    Entries name other configs (next to this file, else the packaged ones); they and ``_self_`` merge in
    list order the way Hydra merges them (mappings deep-merged, later wins; ``_self_`` last when absent).
    Group entries and overrides (``probe: command``, ``override ...``) are refused in one line.
    """
    from omegaconf import OmegaConf

    if path in _chain:
        raise ConfigError(f"{path}: defaults list includes itself ({' -> '.join(p.name for p in (*_chain, path))})")
    data = read_yaml_mapping(path)
    defaults = data.pop("defaults", None)
    if defaults is None:
        return data
    if not isinstance(defaults, list):
        raise ConfigError(f"{path}: defaults: {defaults!r} is not a list; write defaults: [other_config, _self_]")
    values.distinct(f"{path}: defaults", defaults, "each config once")
    if "_self_" not in defaults:
        defaults = [*defaults, "_self_"]
    parts = []
    for entry in defaults:
        if entry == "_self_":
            parts.append(data)
            continue
        if not isinstance(entry, str) or not entry.strip("/ ") or entry.startswith(("override ", "optional ")) or "@" in entry:
            raise ConfigError(
                f"{path}: defaults entry {entry!r} can't be honoured; allowed: names of other configs and _self_ "
                f"(set a probe or launcher with probe.name=... / launcher=... keys instead)"
            )
        other = resolve_conf_file(entry.lstrip("/"), near=path.parent)
        parts.append(load_yaml_mapping(other, (*_chain, path)))
    merged = dict(OmegaConf.to_container(OmegaConf.merge(*[OmegaConf.create(p) for p in parts]), resolve=False))
    if "name" not in data:  # named by its own file: a base's name would put its runs in the base's run directory
        merged.pop("name", None)
    return merged


def split_conf_override(overrides: Sequence[str]) -> tuple[str | None, list[str]]:
    """(the one conf= value, the other overrides); an empty or second conf= is refused, as is ${...} in a value."""
    conf, rest = None, []
    for item in overrides:
        if item.startswith("conf="):
            value = item.split("=", 1)[1]
            if not value:
                raise ConfigError("conf=: '' is empty; allowed: a config name or a file path (conf=aws_ofi, conf=./my.yaml)")
            if conf is not None:
                raise ConfigError(f"conf={value}: {value!r} is a second conf= (conf={conf} came first); allowed: one conf= "
                                  "per command (a config composes others with defaults: [other, _self_])")
            conf = value
        else:
            if "=" in item:
                key, value = item.split("=", 1)
                values.interpolation(f"override {key}", value)
            rest.append(item)
    return conf, rest


def register_probe_groups(store: Any) -> None:
    """One Hydra group option per registered probe, holding that probe's parameters and defaults."""
    from envmatrix.probes import get_probe, probe_names

    for name in probe_names():
        store.store(group="probe", name=name, node={"name": name, **get_probe(name).defaults})


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def compose_config(overrides: Sequence[str]) -> tuple[Any, Path]:
    """Return (DictConfig, the conf file used)."""
    from hydra import compose, initialize_config_dir
    from hydra.core.config_store import ConfigStore
    from hydra.errors import HydraException
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    from envmatrix.config.schema import SweepSchema

    conf_value, rest = split_conf_override(overrides)
    conf_file = resolve_conf_file(conf_value)
    content = load_yaml_mapping(conf_file)
    allowed = list(SweepSchema.__dataclass_fields__)
    for key in content:
        if key not in allowed:
            raise ConfigError(f"{conf_file}: unknown key {key!r}{suggest_key(str(key))}; allowed: {', '.join(allowed)}")
    for key, value in content.items():
        _check_top_level(str(conf_file), key, value)
    if content.get("expect") is not None:
        from envmatrix.config.expect import parse_expect

        parse_expect(content["expect"], conf_file.name)  # before Hydra, whose type error names no key
    _check_override_syntax(rest)
    rest = _whole_mappings(content, rest)
    for item in rest:
        key, _, text = item.lstrip("+").partition("=")
        if key in allowed and text:
            check_scalar_kind(f"override {item}", key, _override_value(item))
    check_override_keys(rest)
    written = [(_open_mapping_override(o), o) for o in rest]  # messages quote what the user wrote, not the ++ form
    rest = [sent for sent, _ in written]
    store = ConfigStore.instance()
    store.store(name="envmatrix_schema", node=SweepSchema)
    store.store(group="conf", name="selected", node=content, package="_global_")
    register_probe_groups(store)
    # The probe group must match the probe the file names, so its keys are the right ones.
    chosen = [o for o in rest if o.startswith("probe=")]
    from envmatrix.probes import probe_names

    for item in chosen:
        name = item.split("=", 1)[1]
        if name not in probe_names():
            raise ConfigError(f"override {item}: {name!r} is not a probe{did_you_mean(name, probe_names())}; "
                              f"allowed: {', '.join(probe_names())}")
    named = (content.get("probe") or {}).get("name") if isinstance(content.get("probe"), dict) else None
    overridden = chosen or any(o.lstrip("+").startswith("probe.name=") for o in rest)
    if named is not None and named not in probe_names() and not overridden:  # it picks the group; Hydra's error names no key
        raise ConfigError(f"{conf_file.name}: probe.name: {named!r} is not a probe{did_you_mean(str(named), probe_names())}; "
                          f"allowed: {', '.join(probe_names())}")
    # probe.name=command on the command line picks the group too (else builtin's keys would meet command's name)
    named = next((o.split("=", 1)[1] for o in rest if o.lstrip("+").startswith("probe.name=")
                  and o.split("=", 1)[1] in probe_names()), named)
    group = [] if chosen else [f"probe={named or 'builtin'}"]
    if isinstance(content.get("probe"), dict):
        _check_probe_kinds(conf_file.name, (chosen[-1].split("=", 1)[1] if chosen else named) or "builtin", content["probe"])

    def composed(overrides: Sequence[str]) -> Any:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            return compose(config_name="config", overrides=["conf=selected", *group, *overrides])

    try:
        cfg = composed(rest)
    except (HydraException, OmegaConfBaseException, ValueError, TypeError) as exc:  # TypeError: Hydra's del of a list entry
        explained = _path_problem(composed, written) or _explain(exc, conf_file, rest)
        for sent, given in written:
            explained = explained.replace(f"override {sent}:", f"override {given}:")
        raise ConfigError(explained) from None
    OmegaConf.set_readonly(cfg, True)
    return cfg, conf_file


def check_overrides(overrides: Sequence[str]) -> None:
    """What can be said of overrides without reading a config: Hydra's syntax and the schema's top-level keys
    (``envmatrix submit`` checks a batch job's overrides so, before the job waits in the queue)."""
    _, rest = split_conf_override(overrides)
    _check_override_syntax(rest)
    check_override_keys(rest)


def check_override_keys(overrides: Sequence[str]) -> None:
    """Each override names a top-level key of the schema (with a did-you-mean), and ``~`` removes none of them."""
    from envmatrix.config.schema import SweepSchema

    allowed = list(SweepSchema.__dataclass_fields__)
    for item in overrides:
        top = item.lstrip("+~").split("=", 1)[0].split(".", 1)[0]
        if top == "hydra":  # hydra.job.chdir=true, hydra.verbose=true were taken and did nothing
            raise ConfigError(f"override {item}: hydra.* configures Hydra's application runner, which envmatrix does "
                              f"not use, so it would change nothing; allowed: {', '.join(allowed)} (--out DIR for where "
                              "results go)")
        if ("=" in item or item.startswith("~")) and top not in allowed and top != "probe":
            raise ConfigError(f"override {item}: unknown key {top!r}{suggest_key(top)}; allowed: {', '.join(allowed)}")
        path = item[1:].split("=", 1)[0].split(".")
        if item.startswith("~") and len(path) == 2 and path[0] in LIST_KEYS:  # known without the config (submit)
            raise ConfigError(_list_entry_removed(item, path[0], entries_are_mappings=path[0] == "strategies"))
        if item.startswith("~") and item[1:].split("=", 1)[0] in allowed:
            # every resolved config has each schema key (resolve reads them); removing one is a value of its own
            key = item[1:].split("=", 1)[0]
            inside = f", or remove a key inside it (~{key}.NAME)" if key in MAPPING_KEYS else ""
            raise ConfigError(f"override {item}: removes the top-level key {key}, which every config has; allowed: give it "
                              f"a value ({key}={_default_text(key)} is the default){inside}")


def _check_override_syntax(overrides: Sequence[str]) -> None:
    """Name the override Hydra cannot parse (its own message does not), and how to pass the value literally."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    parser = OverridesParser.create()
    for item in overrides:
        if "\n" in item or "\r" in item:  # echoed as given, the message itself spanned lines
            raise ConfigError(f"override {item!r}: spans lines; allowed: one line per override (a value with a line break "
                              "belongs in the config file)")
        if "=" not in item and not item.startswith("~"):  # a stray word: Hydra's fix (quote the value) would not help
            raise ConfigError(f"override {item}: not KEY=VALUE{suggest_key(item)}; allowed: KEY=VALUE such as backend=gloo, "
                              "~KEY to remove a key, or the command's flags (--help)")
        try:
            parser.parse_override(item)
        except HydraException as exc:
            key, _, value = item.partition("=")
            fix = f"quote the value so it passes literally: {key}='{value}'" if "'" not in value else "remove the quotes inside the value"
            if not _parses(parser, f"{key}=x"):  # the key is the problem, and quoting the value would not help
                fix = ("each dotted part of a key must start with a letter (a size as a byte count: 67108864, not 64M; "
                       "a grid such as 1x4 only in the config file)")
            raise ConfigError(f"override {item}: Hydra cannot parse it ({_one_line(exc)}); {fix}") from None


def _check_top_level(where: str, key: str, value: Any) -> None:
    """A top-level value of the kind its schema field holds, before Hydra, whose type errors name no key."""
    kind = dict if key in MAPPING_KEYS else list if key in LIST_KEYS else None
    if kind is not None and value is not None and not isinstance(value, kind):
        raise ConfigError(f"{where}: {key}: {value!r} is not a {'mapping' if kind is dict else 'list'}; "
                          f"allowed: {SCHEMA_KINDS[key]}")
    check_scalar_kind(where, key, value)
    number = next((k for k in value if not isinstance(k, str)), None) if kind is dict and value else None
    if number is not None:  # YAML reads `5:` as a number, which the schema's text-keyed mappings refuse without a key
        raise ConfigError(f"{where}: {key}.{number}: the key {number!r} is a number; allowed: text keys "
                          f"(quote it: '{number}')")


def _check_probe_kinds(where: str, probe: str, block: dict[str, Any]) -> None:
    """The file's probe values against the kind of the probe's defaults: Hydra cannot merge a mapping into a list
    (collectives: {a: 1}) nor a list into a mapping, and says so naming no key ('(top level)')."""
    from envmatrix.probes import get_probe

    defaults = get_probe(probe).defaults
    for key, value in block.items():
        default = defaults.get(key)
        for kind, other, what in ((list, dict, "a list"), (dict, list, "a mapping")):
            if isinstance(default, kind) and isinstance(value, other):
                raise ConfigError(f"{where}: probe.{key}: {value!r} is not {what}; allowed: {what} (the {probe} probe's "
                                  f"default: {default!r})")


def _whole_mappings(content: dict[str, Any], overrides: Sequence[str]) -> list[str]:
    """``setups={b: {...}}`` (any mapping key but probe, whose ``probe=NAME`` picks a probe) and, at any depth, a
    mapping given for a mapping the file has (``setups.a={...}``, ``search.space={}``, ``probe.bench={...}``) replaces
    it in the file's content, as Hydra replaces a node; Hydra's own override would merge into it (keeping the keys the
    override leaves out), and the schema's struct mode would refuse each new top-level key ("unknown key 'b'").
    ``++key=`` replaces so too (``envmatrix search`` sends ``search.*`` so); ``+key=`` stays Hydra's. Earlier
    overrides at or under that key are dropped (the later mapping replaces what they set). Returns the rest."""
    rest: list[str] = []
    for item in overrides:
        key, sep, _ = item.removeprefix("++").partition("=")
        parts = key.split(".")
        target, depth = _descend(content, parts)
        if item.startswith("+") and not item.startswith("++") and sep:
            added = key[1:].split(".")
            node, reached = _descend(content, added)
            if reached == len(added) and isinstance(node, dict):
                # Hydra refuses +KEY on a set scalar but merges into a set mapping: the same refusal for both
                raise ConfigError(_already_set(item, key[1:]))
        replaces = sep and not key.startswith(("+", "~")) and (
            key in MAPPING_KEYS and key != "probe" if len(parts) == 1 else depth == len(parts) and isinstance(target, dict))
        value = _override_value(item) if replaces else None
        if not isinstance(value, dict):
            rest.append(item)
            continue
        values.plain_tree(f"override {item}", value, key)
        if len(parts) == 1:
            _check_top_level(f"override {item}", key, value)
        parent = _descend(content, parts[:-1])[0]
        parent[int(parts[-1]) if isinstance(parent, list) else parts[-1]] = value
        rest = [o for o in rest if not f"{o.lstrip('+~').split('=', 1)[0]}.".startswith(f"{key}.")]
    return rest


def _descend(tree: Any, parts: Sequence[str]) -> tuple[Any, int]:
    """The node of ``tree`` (mappings and lists, plain or OmegaConf's) that the longest prefix of ``parts`` reaches,
    and that prefix's length: it stops at a key a mapping lacks, a part that is no index of a list (or one past its
    end) and a value that is neither."""
    from collections.abc import Mapping

    node = tree
    for depth, part in enumerate(parts):
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif _is_list(node) and _is_index(part) and int(part) < len(node):
            node = node[int(part)]
        else:
            return node, depth
    return node, len(parts)


def _is_index(part: str) -> bool:
    return part.isascii() and part.isdigit()


def _is_list(node: Any) -> bool:
    from omegaconf import ListConfig

    return isinstance(node, (list, ListConfig))


def _list_entry_removed(item: str, key: str, entries_are_mappings: bool) -> str:
    return (f"override {item}: removes an entry of the list {key}, which an override cannot; allowed: {key}=[...] "
            f"(the list without it)" + (f", or ~{key}.N.KEY (a key of entry N)" if entries_are_mappings else ""))


def _path_problem(composed: Any, written: Sequence[tuple[str, str]]) -> str | None:
    """Why the override Hydra failed on does not lead where its key says, seen in the config as the overrides before
    it left it (``composed(overrides)``; Hydra's own answer to these is a TypeError or ValueError naming no override,
    or a misleading "unknown key"): a part that is no index of a list (grids.x=1x2), a key inside a value that is
    neither mapping nor list (grids.0.x=1, grids.x=... with grids: auto), a list entry removed (~grids.0,
    ~probe.collectives.0: Hydra cannot delete one). None if it is not wrong so."""
    from collections.abc import Mapping

    sent = [s for s, _ in written]
    configs: dict[int, Any] = {}

    def composes(count: int) -> bool:
        try:
            configs[count] = composed(sent[:count])
        except Exception:  # what Hydra raises, in its own words: _explain reads them
            return False
        return True

    if not written or not composes(0):
        return None
    low, high = 0, len(sent)  # the first `low` overrides compose; all of them do not (Hydra applies them in order)
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if composes(middle) else (low, middle)
    item, given = written[low]
    parts = item.lstrip("+~").split("=", 1)[0].split(".")
    if len(parts) < 2:
        return None
    cfg = configs[low]
    node, depth = _descend(cfg, parts)
    reached = ".".join(parts[:depth])
    if depth == len(parts):
        if item.startswith("~") and _is_list(_descend(cfg, parts[:-1])[0]):
            return _list_entry_removed(given, ".".join(parts[:-1]), isinstance(node, Mapping))
        return None
    part = parts[depth]
    if _is_list(node) and not _is_index(part):
        return (f"override {given}: {reached} is a list, and {part!r} is not an index of it; allowed: {reached}.N=... "
                f"with N the index of an entry the config has (from 0), or {reached}=[...] for the whole list")
    if depth and node is not None and not _is_list(node) and not isinstance(node, Mapping):
        kind = SCHEMA_KINDS.get(reached, "") if depth == 1 else f"a value in place of {node!r}"
        return (f"override {given}: {reached} is {node!r}, a single value, so it has no entry {part!r}; "
                f"allowed: {reached}=..." + (f" ({kind})" if kind else ""))
    return None  # past the end of a list, a key a mapping lacks: _explain has Hydra's words for them


def _override_value(item: str) -> Any:
    """The value Hydra reads from ``key=value`` (true -> True, 5 -> 5, 'x' -> 'x'); the syntax was checked before."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    return OverridesParser.create().parse_override(item).value()


def check_scalar_kind(where: str, key: str, value: Any) -> None:
    """A true/false key given a number or text, or a text key given true/false: OmegaConf would turn 5 into True
    (hermetic: 5) and true into 'True' (name: true) without a word, so each is refused with the key."""
    from envmatrix.config.schema import SweepSchema

    kind = SweepSchema.__dataclass_fields__[key].type
    if kind == "bool" and value is not None and not isinstance(value, bool):
        raise ConfigError(f"{where}: {key}: {value!r} is not true or false; allowed: {SCHEMA_KINDS[key]}")
    if kind in ("str", "Optional[str]") and isinstance(value, bool):
        quote = " (quote it to keep it text)" if kind == "Optional[str]" else ""
        raise ConfigError(f"{where}: {key}: {str(value).lower()} is true/false, not text; allowed: {SCHEMA_KINDS[key]}{quote}")


def _parses(parser: Any, override: str) -> bool:
    from hydra.errors import HydraException

    try:
        parser.parse_override(override)
    except HydraException:
        return False
    return True


# Schema fields that are free-form mappings: a dotted override may create keys the config lacks
# (launcher_opts.mpirun.extra_args=[...]); the owning module then checks them with its own did-you-mean.
# strategies is a list of such mappings (strategies.0.labels={...}; each kind checks its keys).
OPEN_MAPPINGS = ("setups", "probe", "search", "launcher_opts", "expect", "network", "network_options", "strategies")


def _open_mapping_override(item: str) -> str:
    """``launcher_opts.mpirun.x=1`` -> ``++launcher_opts.mpirun.x=1`` (Hydra: add or override)."""
    if item.startswith(("+", "~")) or "=" not in item:
        return item
    key = item.split("=", 1)[0]
    return f"++{item}" if "." in key and key.split(".", 1)[0] in OPEN_MAPPINGS else item


def nested_keys() -> dict[str, list[str]]:
    """Documented keys one level down, for suggestions such as trials -> search.trials."""
    from envmatrix.launchers.shim import COMMON_OPTIONS
    from envmatrix.probes import get_probe, probe_names
    from envmatrix.config.schema import SEARCH_DEFAULTS

    probe = sorted({"name", *(k for n in probe_names() for k in get_probe(n).defaults)})
    return {"probe": probe, "search": list(SEARCH_DEFAULTS), "launcher_opts.<launcher>": list(COMMON_OPTIONS)}


def suggest_key(key: str) -> str:
    """`` (did you mean X?)`` over top-level keys, then over probe.*, search.* and launcher_opts.<launcher>.*."""
    from envmatrix.config.schema import SweepSchema

    top = did_you_mean(key, SweepSchema.__dataclass_fields__)
    if top:
        return top
    for parent, keys in nested_keys().items():
        if key in keys:
            return f" (did you mean {parent}.{key}?)"
    dotted = [f"{parent}.{k}" for parent, keys in nested_keys().items() for k in keys]
    close = did_you_mean(key, [d.rsplit(".", 1)[1] for d in dotted])
    if close:
        word = close[len(" (did you mean "):-2]
        return f" (did you mean {next(d for d in dotted if d.endswith('.' + word))}?)"
    return ""


def _default_text(key: str) -> str:
    """The schema default of a top-level key as an override writes it (auto, [], {}, null, 16)."""
    import dataclasses

    from envmatrix.config.schema import SweepSchema

    field = SweepSchema.__dataclass_fields__[key]
    value = field.default_factory() if field.default is dataclasses.MISSING else field.default  # type: ignore[misc]
    return "null" if value is None else str(value).lower() if isinstance(value, bool) else str(value)


@contextlib.contextmanager
def overrides_blamed(conf_file: Path, overrides: Sequence[str]) -> Iterator[None]:
    """A value the checks after composition refuse as ``FILE: KEY.PATH: ...`` names the override that set it when
    one did (``setups.a.NCCL_PROTO=x``, ``setups.a={...}``, ``search.space={...}``): the file never held it."""
    try:
        yield
    except ConfigError as exc:
        raise ConfigError(_blamed(str(exc), conf_file.name, overrides)) from None


def _blamed(message: str, file_name: str, overrides: Sequence[str]) -> str:
    head, sep, rest = message.partition(": ")
    path, _, why = rest.partition(": ")
    if head != file_name or not sep or not re.fullmatch(r"[\w.\[\]-]+", path):
        return message
    dotted = re.sub(r"\[(\d+)\]", r".\1", path)
    for item in reversed(overrides):
        key, has_value, _ = item.lstrip("+").partition("=")
        if has_value and not item.startswith("~") and (dotted == key or dotted.startswith(f"{key}.")):
            return f"override {item}: {path}: {why}"
    return message


def _already_set(item: str, key: str) -> str:
    return (f"override {item}: {key} is already set, and + only adds a key that is not; "
            f"allowed: {item.lstrip('+')} (replace it) or ++{item.lstrip('+')} (add or replace)")


def _explain(exc: BaseException, conf_file: Path, overrides: Sequence[str]) -> str:
    import re

    from envmatrix.config.schema import SweepSchema

    full = f"{exc}\n{exc.__cause__ or ''}"
    message = _one_line(exc)
    keys = list(SweepSchema.__dataclass_fields__)
    # Hydra's own words for +KEY=... on a key that is set and ~KEY on one that is not name the key, not the override
    added = re.match(r"Could not append to config\. An item is already at '([^']*)'", message)
    if added:
        item = next((o for o in overrides if o.startswith("+") and o[1:].split("=", 1)[0] == added.group(1)), f"+{added.group(1)}")
        return _already_set(item, added.group(1))
    removed = re.match(r"Could not delete from config\. '([^']*)' does not exist", message)
    if removed:
        item = next((o for o in overrides if o.startswith("~") and o[1:].split("=", 1)[0] == removed.group(1)), f"~{removed.group(1)}")
        return f"override {item}: {removed.group(1)} is not set, so there is nothing to remove; allowed: ~ of a key the config has"
    if "Ambiguous value" in message:
        bad = next((o for o in overrides if "," in o and "[" not in o), "")
        key = bad.split("=", 1)[0]
        return f"override {bad}: a comma list needs brackets here; write {key}=[{bad.split('=', 1)[-1]}]"
    if "Key '" in full and "not in" in full:
        key = full.split("Key '", 1)[1].split("'", 1)[0]
        return f"overrides: unknown key {key!r}{suggest_key(key)}; allowed: {', '.join(keys)}"
    for line in full.splitlines():
        if "could not be converted" in line or line.strip().startswith("Value '"):
            key = next((ln.split(":", 1)[1].strip() for ln in full.splitlines() if "full_key:" in ln), "?")
            given = next((o for o in overrides if o.lstrip("+").split("=", 1)[0] == key), None)  # else the file's value
            where = f"override {given}" if given is not None else conf_file.name
            return f"{where}: {key}: {line.strip()}; allowed: {SCHEMA_KINDS.get(key, 'a value of the type the key has')}"
    full_key = next((ln.split(":", 1)[1].strip() for ln in full.splitlines() if "full_key:" in ln), "")
    if "list index out of range" in full and "Error merging override " in message:
        item = message.split("Error merging override ", 1)[1]
        top = full_key.split("[", 1)[0]
        return (f"override {item}: {full_key} is past the end of the list {top}; allowed: an index of an entry the "
                f"config has (from 0), or {top}=[...] for the whole list")
    if full_key or "Cannot merge" in full or "raised while composing" in message:
        # a value of the wrong kind (a list where a mapping goes, text where a list goes): Hydra names no key
        # for the config file's own values, so the file's top-level keys are checked against the schema here
        where = (f"override {message.split('Error merging override ', 1)[1]}" if "Error merging override " in message
                 else conf_file.name)
        key = full_key or "(top level)"
        top = key.split(".", 1)[0]
        expected = (SCHEMA_KINDS.get(top, "a value of the kind the schema gives it") if key == top
                    else "a value of the kind this key already has (a mapping cannot replace a list, nor a list a mapping)")
        return f"{where}: {key}: a value of the wrong kind; allowed: {expected}"
    return f"{conf_file.name}: {message}"


MAPPING_KEYS = ("setups", "probe", "search", "launcher_opts", "expect", "network", "network_options")
LIST_KEYS = ("strategies", "hosts")
# What each top-level key holds, for the one-line answer to a value of the wrong kind (config.schema.SweepSchema)
SCHEMA_KINDS = {
    "name": "text (it names the run directory)", "backend": "one of auto, nccl, gloo", "allow_ignored_vars": "true or false",
    "grids": "a list of grids such as [1x2, 2x2], or auto", "launcher": "a launcher name such as local or mpirun",
    "setups": "a mapping of setup name to {VAR: value}", "strategies": "a list of mappings, each with kind:",
    "probe": "a mapping of probe settings such as {timeout_s: 60}", "seed": "an integer", "max_local_ranks": "an integer",
    "description": "text", "search": "a mapping such as {trials: 20, space: {...}}", "hosts": "a list of host names",
    "launcher_opts": "a mapping of launcher name to its options", "expect": "a mapping of collective to sizes",
    "network": "a mapping of condition name to {rate: ..., delay: ...}", "network_options": "a mapping such as {interface: eth1}",
    "hermetic": "true or false",
}
