"""Catalog loading, value domains and the one-line errors setups get from them."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from envmatrix.catalog import (
    SEARCH_SPACES_DIR,
    BytesDomain,
    Catalog,
    Domain,
    EnumDomain,
    default_catalog,
    load_catalog,
)
from envmatrix.env.atoms import Atom, Setup, atoms_from_mapping
from envmatrix.errors import ConfigError

SHIPPED = sorted(SEARCH_SPACES_DIR.glob("*.yaml"))

# Section 6 of bisect_search_and_nccl_env.md, plus the FI_* variables it discusses.
SECTION6_NCCL = [
    "NET_GDR_LEVEL", "NET_GDR_READ", "CROSS_NIC", "COLLNET_ENABLE", "P2P_LEVEL", "P2P_DISABLE",
    "SHM_DISABLE", "IB_DISABLE", "ALGO", "PROTO", "MIN_NCHANNELS", "MAX_NCHANNELS", "MIN_CTAS",
    "MAX_CTAS", "BUFFSIZE", "NTHREADS", "SOCKET_IFNAME", "SOCKET_NTHREADS", "NSOCKS_PERTHREAD",
    "NET", "NET_PLUGIN", "NVLS_ENABLE", "PXN_DISABLE", "DEBUG", "DEBUG_SUBSYS",
]
SECTION6_FI = [
    "FI_PROVIDER", "FI_EFA_USE_DEVICE_RDMA", "FI_EFA_FORK_SAFE", "FI_CXI_DISABLE_HOST_REGISTER",
    "FI_MR_CACHE_MONITOR", "FI_CXI_DEFAULT_CQ_SIZE",
]
WHERE = "conf/aws_ofi.yaml: setups.0.NCCL_NET_GDR_LEVEL"


@pytest.fixture(scope="module")
def cat() -> Catalog:
    return load_catalog()


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


GOOD_VAR = """
  {name}:
    domain: {{bool: true}}
    default: "0"
    since: null
    meaning: test variable
"""


# ---------------------------------------------------------------- shipped catalogs


def test_search_spaces_dir_is_repo_root_folder():
    assert SEARCH_SPACES_DIR == Path(__file__).resolve().parents[1] / "search_spaces"
    assert {p.name for p in SHIPPED} >= {"nccl.yaml", "fi.yaml", "paths.yaml", "torch_gloo.yaml"}


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_each_shipped_catalog_loads_alone(path):
    cat = load_catalog([path])
    assert len(cat) > 0
    assert {cat.spec(n).catalog for n in cat.names} == {path.stem}


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_every_variable_has_meaning_domain_and_since_key(path):
    raw = yaml.safe_load(path.read_text())["variables"]
    cat = load_catalog([path])
    for name, entry in raw.items():
        assert "since" in entry, f"{path.name}: {name} lacks a since key"
        assert entry["since"] is None or isinstance(entry["since"], str), name
        spec = cat.spec(name)
        assert spec.meaning.strip(), name
        assert isinstance(spec.domain, Domain), name


def test_all_shipped_load_together_without_duplicates(cat):
    assert len(cat) == sum(len(load_catalog([p])) for p in SHIPPED)
    assert default_catalog().names == cat.names


@pytest.mark.parametrize("var", [f"NCCL_{v}" for v in SECTION6_NCCL] + SECTION6_FI)
def test_section6_variables_are_catalogued(cat, var):
    assert var in cat


def test_requested_extra_variables_are_catalogued(cat):
    for var in ["NCCL_HOSTID", "NCCL_IB_HCA", "NCCL_P2P_NVL_CHUNKSIZE", "NCCL_CUMEM_ENABLE",
                "NCCL_TREE_THRESHOLD", "NCCL_RAS_ENABLE", "LD_LIBRARY_PATH", "LD_PRELOAD",
                "GLOO_SOCKET_IFNAME", "TORCH_NCCL_ASYNC_ERROR_HANDLING", "CUDA_DEVICE_MAX_CONNECTIONS",
                "FI_CXI_RX_MATCH_MODE", "FI_LOG_LEVEL"]:
        assert var in cat, var
    assert "NCCL_ALGO_THRESHOLD" not in cat  # not a real NCCL variable


def test_defaults_and_examples_lie_in_their_domains(cat):
    for name in cat.names:
        spec = cat.spec(name)
        if spec.default is not None:
            assert spec.domain.contains(spec.default), (name, spec.default)
        for example in spec.examples:
            assert spec.domain.contains(example), (name, example)


def test_known_defaults(cat):
    assert cat.spec("NCCL_BUFFSIZE").default == "4194304"
    assert cat.spec("NCCL_CROSS_NIC").default == "2"
    assert cat.spec("NCCL_NET_GDR_LEVEL").default is None
    assert cat.spec("NCCL_NET_GDR_LEVEL").since == "2.3.4"
    assert cat.spec("NCCL_NET_GDR_LEVEL").multi_node_only is True
    assert cat.spec("NCCL_DEBUG_SUBSYS").default == "INIT,BOOTSTRAP,ENV"


def test_path_variables_are_path_lists(cat):
    assert cat.spec("LD_LIBRARY_PATH").domain.kind == "path_list"
    assert cat.spec("LD_PRELOAD").domain.kind == "path_list"
    assert cat.spec("NCCL_NET_PLUGIN").catalog == "nccl"


def test_pinned_multicast_switches(cat):
    assert cat.spec("NCCL_NVLS_ENABLE").pinned is True
    assert set(cat.pinned) == {"NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS"}
    assert cat.spec("NCCL_NET_GDR_LEVEL").pinned is False


def test_catalog_is_immutable(cat):
    with pytest.raises(AttributeError):
        cat.foo = 1
    with pytest.raises(TypeError):
        cat._specs["X"] = None


# ---------------------------------------------------------------- error messages


def test_unknown_variable_suggests_close_name(cat):
    with pytest.raises(ConfigError) as err:
        cat.validate_atom(Atom("NCCL_NET_GDR_LEVL", "set", "PHB"), "conf/a.yaml: setups.0.NCCL_NET_GDR_LEVL", False)
    assert str(err.value) == (
        "conf/a.yaml: setups.0.NCCL_NET_GDR_LEVL: unknown variable NCCL_NET_GDR_LEVL "
        "(did you mean NCCL_NET_GDR_LEVEL?); use a catalogued name or pass --allow-unknown-vars "
        "for site-specific variables"
    )


def test_unknown_variable_without_close_name_has_no_suggestion(cat):
    with pytest.raises(ConfigError, match=r"unknown variable MY_SITE_KNOB; use a catalogued") as err:
        cat.validate_atom(Atom("MY_SITE_KNOB", "set", "1"), "x", False)
    assert "did you mean" not in str(err.value)


def test_lowercase_name_suggests_uppercase(cat):
    with pytest.raises(ConfigError, match=r"did you mean NCCL_DEBUG\?"):
        cat.check_value("nccl_debug", "INFO", "x")


def test_bad_value_message_lists_allowed_set(cat):
    with pytest.raises(ConfigError) as err:
        cat.check_value("NCCL_NET_GDR_LEVEL", "PXN", WHERE)
    assert str(err.value) == (
        f"{WHERE}: value 'PXN' for NCCL_NET_GDR_LEVEL is not allowed; "
        "allowed: LOC, PIX, PXB, PHB, SYS (aliases 0-5)"
    )
    assert "\n" not in str(err.value)


def test_bad_value_messages_for_bool_and_int(cat):
    with pytest.raises(ConfigError, match=r"value 'true' for NCCL_P2P_DISABLE is not allowed; allowed: 0 or 1$"):
        cat.check_value("NCCL_P2P_DISABLE", "true", "w")
    with pytest.raises(ConfigError, match=r"allowed: integer 1\.\.64$"):
        cat.check_value("NCCL_MAX_CTAS", "65", "w")


# ---------------------------------------------------------------- domains


def test_alias_canonicalization(cat):
    assert cat.canonical("NCCL_NET_GDR_LEVEL", "3") == "PHB"
    assert cat.canonical("NCCL_NET_GDR_LEVEL", "0") == "LOC"
    assert cat.canonical("NCCL_NET_GDR_LEVEL", "4") == "SYS"
    assert cat.canonical("NCCL_NET_GDR_LEVEL", "PXB") == "PXB"
    assert cat.canonical("NCCL_P2P_LEVEL", "1") == "PIX"  # seed 004: "NCCL_P2P_LEVEL set by environment to PIX"
    assert cat.canonical("NCCL_NET_GDR_LEVEL", "9") == "9"  # not an alias: unchanged
    assert cat.canonical("NCCL_BUFFSIZE", "4194304") == "4194304"
    assert cat.canonical("SOME_UNKNOWN", "x") == "x"
    cat.check_value("NCCL_P2P_LEVEL", "0", "w")
    cat.check_value("NCCL_NET_GDR_LEVEL", "5", "w")


def test_enum_is_case_sensitive_unless_flagged(cat):
    with pytest.raises(ConfigError):
        cat.check_value("NCCL_NET_GDR_LEVEL", "phb", "w")
    cat.check_value("NCCL_DEBUG", "info", "w")  # NCCL uses strcasecmp here
    assert cat.canonical("NCCL_DEBUG", "info") == "INFO"


@pytest.mark.parametrize("value", [
    "^Tree", "Ring,Tree", "ring", "NVLSTree", "PAT",
    "allreduce:tree;broadcast:ring", "ring,collnetdirect;allreduce:tree,collnetdirect;broadcast:ring",
    "allreduce:^tree",
])
def test_algo_accepts(cat, value):
    cat.check_value("NCCL_ALGO", value, "w")


@pytest.mark.parametrize("value", [
    "Rng", "", "^", "Ring,", "Ring, Tree", "allreduce:rng", "allreduce:", "allreduce:tree;;",
    "allreduce:tree;ring", "all reduce:tree", "Ring;Tree",
])
def test_algo_rejects(cat, value):
    with pytest.raises(ConfigError, match="comma-separated subset of Ring, Tree"):
        cat.check_value("NCCL_ALGO", value, "w")


def test_other_list_domains(cat):
    cat.check_value("NCCL_PROTO", "^LL128", "w")
    cat.check_value("NCCL_PROTO", "LL,Simple", "w")
    cat.check_value("NCCL_DEBUG_SUBSYS", "INIT,NET", "w")
    cat.check_value("NCCL_DEBUG_SUBSYS", "^ALLOC", "w")
    cat.check_value("FI_PROVIDER", "^efa", "w")
    cat.check_value("FI_PROVIDER", "verbs;ofi_rxm", "w")
    for var, bad in [("NCCL_PROTO", "LL256"), ("NCCL_DEBUG_SUBSYS", "INIT,NETWORK"), ("FI_PROVIDER", "efaa")]:
        with pytest.raises(ConfigError):
            cat.check_value(var, bad, "w")


def test_list_per_function_form_only_where_enabled(cat):
    with pytest.raises(ConfigError):
        cat.check_value("NCCL_DEBUG_SUBSYS", "coll:INIT", "w")


@pytest.mark.parametrize("var,good,bad", [
    ("NCCL_MIN_CTAS", ["1", "64"], ["0", "65", "-1", "8.0", "0x10", " 8", "eight", ""]),
    ("NCCL_IB_TIMEOUT", ["0", "31"], ["32"]),
    ("NCCL_IB_GID_INDEX", ["-1", "3"], ["-2"]),
    ("NCCL_BUFFSIZE", ["4194304", "3000000"], ["4M", "0", "4194304.0"]),
    ("NCCL_NTHREADS", ["64", "512"], ["100", "1024"]),
])
def test_int_ranges(cat, var, good, bad):
    for value in good:
        cat.check_value(var, value, "w")
    for value in bad:
        with pytest.raises(ConfigError):
            cat.check_value(var, value, "w")


def test_bytes_pow2_domain():
    dom = BytesDomain(min=1024, max=1 << 24, pow2=True)
    assert dom.contains("4096") and dom.contains("1024")
    assert not dom.contains("3000") and not dom.contains("512") and not dom.contains(str(1 << 25))
    assert dom.describe() == "byte count (plain integer) 1024..16777216, power of 2"


def test_enum_describe_lists_non_numeric_aliases():
    dom = EnumDomain(("a", "b"), (("x", "a"),))
    assert dom.describe() == "a, b (aliases x=a)"
    assert dom.enumerate() == ["a", "b"]


def test_path_list_atoms(cat):
    setup = Setup("s", atoms_from_mapping(
        {"LD_LIBRARY_PATH": {"prepend": ["/soft/aws-ofi-nccl/lib", "/soft/hwloc/lib/"]}}, "setups.0"))
    cat.validate_setup(setup, "conf/a.yaml: setups.0", allow_unknown=False)
    cat.validate_atom(Atom("LD_PRELOAD", "set", "/a/libx.so:/b/liby.so"), "w", False)
    with pytest.raises(ConfigError, match=r"^w: prepend is only allowed for path lists .*NCCL_NET_GDR_LEVEL"):
        cat.validate_atom(Atom("NCCL_NET_GDR_LEVEL", "prepend", "PHB"), "w", False)


def test_unset_needs_only_known_name(cat):
    cat.validate_atom(Atom("NCCL_NET_GDR_LEVEL", "unset"), "w", False)
    with pytest.raises(ConfigError, match="unknown variable NCCL_NET_GDR_LEVL"):
        cat.validate_atom(Atom("NCCL_NET_GDR_LEVL", "unset"), "w", False)


def test_unknown_op_rejected(cat):
    with pytest.raises(ConfigError, match="op 'replace' not allowed"):
        cat.validate_atom(Atom("NCCL_DEBUG", "replace", "INFO"), "w", False)


# ---------------------------------------------------------------- values()


def test_values_for_bool_enum_and_examples(cat):
    assert cat.values("NCCL_P2P_DISABLE") == ["0", "1"]
    assert cat.values("NCCL_NET_GDR_LEVEL") == ["LOC", "PIX", "PXB", "PHB", "SYS"]
    assert cat.values("NCCL_NTHREADS") == ["64", "128", "256", "512"]
    assert cat.values("NCCL_BUFFSIZE") == ["1048576", "2097152", "4194304", "8388608"]
    assert cat.values("NCCL_MIN_NCHANNELS") == ["1", "2", "4", "8", "16", "32"]


def test_values_error_for_free_string_without_examples(cat):
    with pytest.raises(ConfigError) as err:
        cat.values("NCCL_SOCKET_IFNAME", where="sweep.axes.0")
    msg = str(err.value)
    assert msg.startswith("sweep.axes.0: NCCL_SOCKET_IFNAME takes any string")
    assert "no examples" in msg and "\n" not in msg


def test_values_unknown_variable(cat):
    with pytest.raises(ConfigError, match="unknown variable NCCL_BUFSIZE .did you mean NCCL_BUFFSIZE"):
        cat.values("NCCL_BUFSIZE")


# ---------------------------------------------------------------- validate_setup


def test_validate_setup_seed003(cat):
    setup = Setup("(0)", atoms_from_mapping({
        "NCCL_NET_GDR_LEVEL": "PHB", "NCCL_CROSS_NIC": 1, "NCCL_COLLNET_ENABLE": 1,
        "NCCL_NET": "AWS Libfabric",
        "LD_LIBRARY_PATH": {"prepend": ["/soft/libraries/aws-ofi-nccl/v1.9.1-aws/lib", "/soft/libraries/hwloc/lib/"]},
        "FI_CXI_DISABLE_HOST_REGISTER": 1, "FI_MR_CACHE_MONITOR": "userfaultfd", "FI_CXI_DEFAULT_CQ_SIZE": 131072,
    }, "setups.0"))
    cat.validate_setup(setup, "conf/seed003.yaml: setups.0", allow_unknown=False)


def test_validate_setup_allow_unknown(cat):
    setup = Setup("s", (Atom("MY_SITE_KNOB", "set", "7"), Atom("NCCL_NET_GDR_LEVL", "set", "PHB"),
                        Atom("OFI_NCCL_X", "prepend", "/p")))
    cat.validate_setup(setup, "c.yaml: setups.0", allow_unknown=True)
    with pytest.raises(ConfigError, match=r"^c\.yaml: setups\.0\.MY_SITE_KNOB: unknown variable"):
        cat.validate_setup(setup, "c.yaml: setups.0", allow_unknown=False)
    bad = Setup("s", (Atom("MY_SITE_KNOB", "set", "7"), Atom("NCCL_NET_GDR_LEVEL", "set", "PHX")))
    with pytest.raises(ConfigError) as err:
        cat.validate_setup(bad, "c.yaml: setups.1", allow_unknown=True)
    assert str(err.value).startswith("c.yaml: setups.1.NCCL_NET_GDR_LEVEL: value 'PHX' for NCCL_NET_GDR_LEVEL")


# ---------------------------------------------------------------- malformed catalogs


@pytest.mark.parametrize("body,key", [
    ("variables:\n  NCCL_X: [unclosed\n", "not valid YAML at line"),
    ("variables:\n  NCCL_X:\n    domain: {bool: true}\n    meaning: m\n", "variables.NCCL_X: missing keys ['since']"),
    ("variables:\n  NCCL_X:\n    domain: {boolean: true}\n    since: null\n    meaning: m\n",
     "variables.NCCL_X.domain: needs exactly one kind"),
    ("variables:\n  NCCL_X:\n    domain: {enum: [A, B]}\n    default: C\n    since: null\n    meaning: m\n",
     "variables.NCCL_X.default: 'C' is not allowed; allowed: A, B"),
    ("variables:\n  NCCL_X:\n    domain: {bool: true}\n    since: 2.10\n    meaning: m\n",
     "variables.NCCL_X.since: 2.1 read as a number"),
    ("variables:\n  NCCL_X:\n    domain: {enum: [A], aliases: {\"1\": B}}\n    since: null\n    meaning: m\n",
     "variables.NCCL_X.domain.aliases.1: target 'B' is not an item"),
    ("variables:\n  NCCL_X:\n    domain: {int: {min: 1, maxx: 3}}\n    since: null\n    meaning: m\n",
     "variables.NCCL_X.domain.int: options ['maxx'] not allowed"),
    ("variables:\n  NCCL_X:\n    domain: {string: {}}\n    since: null\n    meaning: m\n    examples: 3\n",
     "variables.NCCL_X.examples: expected a list"),
    ("variables:\n  NCCL_X:\n    domain: {bool: true}\n    since: null\n    meaning: m\n    pinned: yes please\n",
     "variables.NCCL_X.pinned: 'yes please' must be true or false"),
    ("variables:\n  NCCL_X:\n    domain: {bool: true}\n    since: null\n    meanin: m\n", "missing keys ['meaning']"),
    ("vars: {}\n", "expected a mapping with a 'variables:' key"),
    ("variables:\n  NCCL_X:\n    domain: {bool: true}\n    since: null\n    meaning: a\n"
     "  NCCL_X:\n    domain: {bool: true}\n    since: null\n    meaning: b\n", "duplicate key 'NCCL_X'"),
])
def test_malformed_catalog_names_file_and_key(tmp_path, body, key):
    path = _write(tmp_path, "broken.yaml", body)
    with pytest.raises(ConfigError) as err:
        load_catalog([path])
    msg = str(err.value)
    assert msg.startswith(f"{path}: "), msg
    assert key in msg, msg
    assert "\n" not in msg


def test_missing_catalog_file(tmp_path):
    with pytest.raises(ConfigError, match="nope.yaml: cannot read catalog file"):
        load_catalog([tmp_path / "nope.yaml"])


def test_duplicate_variable_across_files(tmp_path):
    a = _write(tmp_path, "a.yaml", "variables:" + GOOD_VAR.format(name="NCCL_X"))
    b = _write(tmp_path, "b.yaml", "variables:" + GOOD_VAR.format(name="NCCL_Y") + GOOD_VAR.format(name="NCCL_X"))
    with pytest.raises(ConfigError) as err:
        load_catalog([a, b])
    assert str(err.value) == (f"{b}: variables.NCCL_X: already catalogued in {a}; "
                              "each variable belongs to one catalog file")


def test_custom_catalog_loads(tmp_path):
    path = _write(tmp_path, "site.yaml", "catalog: site\nvariables:" + GOOD_VAR.format(name="SITE_KNOB"))
    cat = load_catalog([path])
    assert cat.names == ("SITE_KNOB",)
    spec = cat.spec("SITE_KNOB")
    assert (spec.catalog, spec.default, spec.since, spec.pinned) == ("site", "0", None, False)
