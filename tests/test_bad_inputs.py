"""Bad-input corpus: every case exits 2 with one message line, no traceback, and leaves an existing store byte-identical.

Each row runs the real CLI as a subprocess in a fresh directory that already holds a valid run directory
(``out/results.sqlite`` with a sweep in it). ``{out}``, ``{tmp}`` and ``{file:NAME}`` in argv are filled in;
``files`` are written first (bytes or text). Most cases stop before any probe starts, so the corpus is fast.
"""

from __future__ import annotations

import re
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

import pytest

GOOD = "backend: gloo\ngrids: [1x2]\nsetups:\n  a: {NCCL_ALGO: Ring}\n"


def _foreign_sqlite(ddl: str = "CREATE TABLE foo (x)") -> bytes:
    """An SQLite database of someone else's tables, where a store or study file is looked for."""
    import sqlite3

    db = sqlite3.connect(":memory:")
    db.execute(ddl)
    data = db.serialize()
    db.close()
    return data


FOREIGN_DB = _foreign_sqlite()
# a database holding one table named as one of the store's, in another layout: it passed as a store, CREATE TABLE IF NOT
# EXISTS added the store's other tables to it (report and diff too), and the sweep left a results.sqlite.lock behind
OTHER_LAYOUT_DB = _foreign_sqlite("CREATE TABLE results (foo)")
PWNED = "pwned"  # a shell metacharacter case that ran its payload would create this file


UNPINNED = {"NCCL_NVLS_ENABLE": None, "TORCH_SYMM_MEM_DISABLE_MULTICAST": None, "NVSHMEM_DISABLE_NVLS": None}


@dataclass(frozen=True)
class Case:
    id: str
    argv: tuple[str, ...]
    expect: str  # a fragment of the one message line
    files: dict = field(default_factory=dict)  # name -> str | bytes
    code: int = 2
    env: dict = field(default_factory=dict)


def conf(id_: str, text: str | bytes, expect: str, *extra: str) -> Case:
    return Case(id_, ("sweep", "conf={file:c.yaml}", *extra, "--out", "{out}"), expect, {"c.yaml": text})


def override(id_: str, expect: str, *items: str, command: str = "sweep", base: str = "conf={file:c.yaml}") -> Case:
    return Case(id_, (command, base, *items, "--out", "{out}"), expect, {"c.yaml": GOOD})


def envfile(id_: str, text: str | bytes, expect: str, *extra: str) -> Case:
    return Case(id_, ("bisect", "--grid", "1x2", "--env-file", "{file:e.env}", *extra, "--out", "{out}"), expect, {"e.env": text})


def space(id_: str, search_yaml: str, expect: str) -> Case:
    text = ("backend: gloo\ngrids: [1x2]\nprobe: {bench: {collectives: [allreduce], min_bytes: 4K, max_bytes: 4K}}\n"
            "search:\n" + search_yaml)
    return Case(id_, ("search", "conf={file:s.yaml}", "--out", "{out}"), expect, {"s.yaml": text})


CASES = [
    # --- configs
    conf("conf-unknown-top-key", GOOD + "setups_extra: 1\n", "unknown key 'setups_extra'"),
    conf("conf-var-typo", GOOD.replace("NCCL_ALGO: Ring", "NCCL_NET_GDR_LEVL: PHB"), "did you mean NCCL_NET_GDR_LEVEL?"),
    conf("conf-value-out-of-domain", GOOD.replace("NCCL_ALGO: Ring", "NCCL_NET_GDR_LEVEL: PHX"), "'PHX'"),
    conf("conf-malformed-yaml", "backend: gloo\ngrids: [1x2\n", "malformed YAML"),
    conf("conf-not-utf8", ("name: caf\xe9\n" + GOOD).encode("latin-1"), "not UTF-8 text"),
    conf("conf-duplicate-setup", GOOD + "  a: {NCCL_ALGO: Tree}\n", "duplicate key 'a'"),
    conf("conf-top-level-list", "- a\n- b\n", "top level is a list"),
    conf("conf-bad-backend", GOOD.replace("backend: gloo", "backend: mpi"), "'mpi'"),
    conf("conf-forbid-transport-on-gloo", GOOD + "probe: {forbid_transport: [NET]}\n", "backend gloo runs no NCCL"),
    conf("conf-bad-strategy", GOOD + "strategies: [{kind: leave_ot, base: a, vars: [NCCL_ALGO]}]\n", "did you mean leave_out"),
    conf("conf-negative-timeout", GOOD + "probe: {timeout_s: -1}\n", "probe.timeout_s"),
    conf("conf-probe-key-typo", GOOD + "probe: {colectives: [allreduce]}\n", "did you mean collectives?"),
    conf("conf-defaults-missing", "defaults: [no_such_base]\n" + GOOD, "no_such_base"),
    conf("conf-defaults-group-form", "defaults: [{probe: command}]\n" + GOOD, "can't be honoured"),
    conf("conf-name-escape", "name: ../../../escaped\n" + GOOD, "path separator"),
    conf("conf-setup-name-escape", GOOD.replace("  a:", "  '../up':"), "contains a path separator"),
    # a strategy's name prefix starts every setup name it makes (was: accepted, setups named '../../xNCCL_ALGO=Tree')
    conf("conf-strategy-name-escape", GOOD + "strategies: [{kind: product, vars: {NCCL_ALGO: [Ring, Tree]}, name: ../../x}]\n",
         "strategies[0].name='../../x': contains a path separator"),
    Case("conf-overrides-safety-pin", ("sweep", "conf={file:c.yaml}", "--out", "{out}"), "safety pin",
         {"c.yaml": GOOD.replace("NCCL_ALGO: Ring", "NCCL_NVLS_ENABLE: 1")}, env={"NCCL_NVLS_ENABLE": "0"}),
    # the caller pinned nothing: NVLink multicast still never goes on (it reached the ranks as 1 before)
    Case("conf-multicast-on-unpinned", ("sweep", "conf={file:c.yaml}", "--out", "{out}"),
         "c.yaml: setups.a.NCCL_NVLS_ENABLE: NCCL_NVLS_ENABLE=1 would turn NVLink multicast on",
         {"c.yaml": GOOD.replace("NCCL_ALGO: Ring", "NCCL_NVLS_ENABLE: 1")}, env=UNPINNED),
    dataclasses.replace(space("search-fixed-multicast-on-unpinned",
                              "  space: {NCCL_ALGO: [Ring, Tree]}\n  fixed: {NCCL_NVLS_ENABLE: 2}\n",
                              "search.fixed.NCCL_NVLS_ENABLE: NCCL_NVLS_ENABLE=2 would turn NVLink multicast on"),
                        env=UNPINNED),
    conf("conf-max-local-ranks-text", GOOD + "max_local_ranks: abc\n", "max_local_ranks"),
    conf("conf-bad-grid", GOOD.replace("[1x2]", "[2y2]"), "'2y2'"),
    conf("conf-zero-grid", GOOD.replace("[1x2]", "['0x2']"), "'0x2'"),
    conf("conf-hex-grid", GOOD.replace("[1x2]", "[0x2]"), "'0x2' is not a grid"),  # YAML 1.1 read 0x2 as the number 2
    conf("conf-grid-too-large", GOOD.replace("[1x2]", "[64x64]"), "64x64"),
    conf("conf-launcher-typo", GOOD + "launcher: mpirn\n", "did you mean mpirun?"),
    conf("conf-launcher-opts-level", GOOD + "launcher_opts: {hosts: [n1]}\n", "launcher_opts.<launcher>.hosts"),
    conf("conf-hosts-with-local-launcher", GOOD + "hosts: [n1, n2]\n", "launcher 'local' starts every rank on this machine"),
    conf("conf-no-setups", "backend: gloo\ngrids: [1x2]\n", "no setups"),
    conf("conf-value-shell-meta", GOOD.replace("Ring", "'Ring; touch pwned'"), "Ring; touch pwned"),
    conf("conf-value-backticks", GOOD.replace("Ring", "'`touch pwned`'"), "`touch pwned`"),
    Case("conf-missing-file", ("sweep", "conf={tmp}/nope.yaml", "--out", "{out}"), "no such config file"),
    Case("conf-is-directory", ("sweep", "conf={tmp}", "--out", "{out}"), "is a directory"),
    Case("conf-name-typo", ("sweep", "conf=aws_of", "--out", "{out}"), "did you mean aws_ofi?"),
    # --- overrides
    override("ovr-top-level-trials", "did you mean search.trials?", "trials=4"),
    override("ovr-backend-typo", "did you mean backend?", "bakend=gloo"),
    override("ovr-comma-list", "needs brackets", "grids=1x2,2x2"),
    override("ovr-seed-text", "seed", "seed=abc"),
    override("ovr-name-escape", "path separator", "name=../../../escaped"),
    override("ovr-name-absolute", "path separator", "name=/tmp/abs"),
    override("ovr-name-dash", "starts with '-'", "name=-rf"),
    override("ovr-name-shell-meta", "override name=x;touch pwned: Hydra cannot parse it", "name=x;touch pwned"),
    override("ovr-name-shell-meta-quoted", "characters outside", "name='x;touch pwned'"),
    override("ovr-launcher-opts-typo", "did you mean mpirun?", "launcher_opts.mpirn.extra_args=[-v]"),
    override("ovr-launcher-opt-typo", "did you mean extra_args?", "launcher=mpirun", "launcher_opts.mpirun.extra_arg=[-v]"),
    override("ovr-probe-key-typo", "did you mean timeout_s?", "probe.timout_s=3"),
    override("ovr-unknown-probe", "unknown probe", "probe.name=nosuch"),
    override("ovr-value-dollar", "quote the value", "setups.a.NCCL_ALGO=$(touch pwned)"),
    override("ovr-value-dollar-quoted", "'$(touch pwned)'", "setups.a.NCCL_ALGO='$(touch pwned)'"),
    override("ovr-bench-size", "min_bytes", "probe.bench={collectives:[allreduce],min_bytes:abc}"),
    # --- env files and bisect arguments
    envfile("env-empty", "", "nothing to bisect"),
    envfile("env-only-comments", "# nothing here\n\n", "nothing to bisect"),
    envfile("env-not-utf8", b"export NCCL_ALGO=R\xe9ng\n", "not UTF-8 text"),
    envfile("env-var-typo", "export NCCL_ALGOO=Ring\n", "did you mean NCCL_ALGO?"),
    envfile("env-bad-value", "export NCCL_PROTO=Simpel\n", "Simpel"),
    Case("env-pin-override", ("bisect", "--grid", "1x2", "--env-file", "{file:e.env}", "--out", "{out}"),
         "e.env: NCCL_NVLS_ENABLE: NCCL_NVLS_ENABLE=1 would override the safety pin",  # was: e.env: setups.e.NCCL_...
         {"e.env": "export NCCL_NVLS_ENABLE=1\n"}, env={"NCCL_NVLS_ENABLE": "0"}),
    Case("env-multicast-on-unpinned", ("bisect", "--grid", "1x2", "--env-file", "{file:e.env}", "--out", "{out}"),
         "e.env: TORCH_SYMM_MEM_DISABLE_MULTICAST: TORCH_SYMM_MEM_DISABLE_MULTICAST=0 would turn NVLink multicast on",
         {"e.env": "export NCCL_ALGO=Ring\nexport TORCH_SYMM_MEM_DISABLE_MULTICAST=0\n"}, env=UNPINNED),
    envfile("env-bad-grid", "export NCCL_ALGO=Ring\n", "2y2", "--grid", "2y2"),
    envfile("env-only-nccl-on-gloo", "export NCCL_ALGO=Ring\n", "reads none of the variables this bisect varies", "backend=gloo"),
    # --grid beyond this host while the config's own grids fit: refused before the run directory exists
    envfile("env-grid-too-big", "export GLOO_SOCKET_IFNAME=lo\n", "8x8 starts 64 gloo ranks", "--grid", "8x8", "grids=[1x2]"),
    Case("env-missing", ("bisect", "--grid", "1x2", "--env-file", "{tmp}/none.env", "--out", "{out}"), "cannot read"),
    Case("versions-nonexistent", ("bisect", "--grid", "1x2", "--versions", "/nonexistent/a", "/nonexistent/b", "--out", "{out}"),
         "no such file or directory"),
    Case("versions-one-path", ("bisect", "--grid", "1x2", "--versions", "{tmp}", "--out", "{out}"), "at least two"),
    Case("versions-colon", ("bisect", "--grid", "1x2", "--versions", "/a:/b", "/c", "--out", "{out}"), "contains ':'"),
    # --- search spaces
    space("space-unknown-var", "  space: {NCCL_ALGOO: [Ring, Tree]}\n", "NCCL_ALGOO"),
    space("space-bad-value", "  space: {NCCL_ALGO: [Ring, Treee]}\n", "Treee"),
    space("space-sampler-typo", "  sampler: tpx\n  space: {NCCL_ALGO: [Ring, Tree]}\n", "tpx"),
    space("space-zero-trials", "  trials: 0\n  space: {NCCL_ALGO: [Ring, Tree]}\n", "trials"),
    space("space-key-typo", "  trails: 3\n  space: {NCCL_ALGO: [Ring, Tree]}\n", "did you mean trials?"),
    space("space-study-escape", "  study_name: ../s\n  space: {NCCL_ALGO: [Ring, Tree]}\n", "study_name"),
    space("space-failure-rate", "  max_failure_rate: 2\n  space: {NCCL_ALGO: [Ring, Tree]}\n", "max_failure_rate"),
    space("space-objective-collective", "  space: {NCCL_ALGO: [Ring, Tree]}\n  objective: {collectives: [allreduc]}\n", "allreduc"),
    # --- stores and paths
    Case("store-corrupt-sweep", ("sweep", "conf={file:c.yaml}", "--out", "{tmp}/bad"), "corrupt store",
         {"c.yaml": GOOD, "bad/results.sqlite": b"garbage, not a database" * 40}),
    Case("store-corrupt-bisect", ("bisect", "--failing", "1x2", "conf={file:c.yaml}", "--out", "{tmp}/bad"), "corrupt store",
         {"c.yaml": GOOD, "bad/results.sqlite": b"\x00\x01garbage" * 100}),
    Case("store-corrupt-bench", ("bench", "conf={file:c.yaml}", "--out", "{tmp}/bad"), "corrupt store",
         {"c.yaml": GOOD, "bad/results.sqlite": b"PK\x03\x04 a zip, not a store" * 10}),
    Case("store-corrupt-study", ("search", "conf={file:s.yaml}", "--out", "{out}"), "file is not a database",
         # a space gloo reads (TORCH_DISTRIBUTED_DEBUG): an NCCL-only space on gloo is refused before the store is opened
         {"s.yaml": "backend: gloo\ngrids: [1x2]\nsearch:\n  space: {TORCH_DISTRIBUTED_DEBUG: ['OFF', INFO]}\n",
          "out/study.sqlite": b"\x13\x37 not a study" * 50}),
    Case("store-is-directory", ("sweep", "conf={file:c.yaml}", "--out", "{tmp}/bad"), "is a directory",
         {"c.yaml": GOOD, "bad/results.sqlite/x": "x"}),
    Case("out-is-file", ("sweep", "conf={file:c.yaml}", "--out", "{file:afile}"), "not a directory", {"c.yaml": GOOD, "afile": "x"}),
    Case("out-under-file", ("sweep", "conf={file:c.yaml}", "--out", "{tmp}/afile/sub"), "cannot create", {"c.yaml": GOOD, "afile": "x"}),
    Case("failing-empty-store-dir", ("bisect", "--failing", "1x2", "conf={file:c.yaml}", "--out", "{tmp}/none"), "no store",
         {"c.yaml": GOOD}),
    # --failing with nothing failing is not bad input: exit 0 (test_bisect_cap_and_repair)
    # --- sizes and bench flags
    override("bench-bad-min-size", "1X", "-b", "1X", command="bench"),
    override("bench-unknown-setup", "--setup", "--setup", "zz", command="bench"),
    override("bench-env-not-kv", "--env", "--env", "NCCL_ALGO", command="bench"),
    override("bench-env-shell-meta", "touch pwned", "--env", "NCCL_ALGO=Ring && touch pwned", command="bench"),
    # --env is named as the flag, not as the setup it builds (was: "bench: setups.env.NCCL_NVLS_ENABLE", "bench.nccl_algo")
    Case("bench-env-pin", ("bench", "conf={file:c.yaml}", "--env", "NCCL_NVLS_ENABLE=1", "--out", "{out}"),
         "--env NCCL_NVLS_ENABLE: NCCL_NVLS_ENABLE=1 would override the safety pin NCCL_NVLS_ENABLE=0", {"c.yaml": GOOD},
         env={"NCCL_NVLS_ENABLE": "0"}),
    Case("bench-env-multicast-on-unpinned", ("bench", "conf={file:c.yaml}", "--env", "NVSHMEM_DISABLE_NVLS=0", "--out", "{out}"),
         "--env NVSHMEM_DISABLE_NVLS: NVSHMEM_DISABLE_NVLS=0 would turn NVLink multicast on", {"c.yaml": GOOD},
         env=UNPINNED),
    override("bench-env-var-typo", "--env nccl_algo: unknown variable nccl_algo (did you mean NCCL_ALGO?)", "--env",
             "nccl_algo=Ring", command="bench"),
    space("space-empty-values", "  space: {NCCL_ALGO: []}\n", "s.yaml: search.space.NCCL_ALGO: empty list"),  # was: search.vars
    # --- expected-bandwidth thresholds (expect: block, --baseline, --tolerance)
    conf("expect-not-mapping", GOOD + "expect: 5\n", "expect: 5 is not a mapping"),
    conf("expect-unknown-collective", GOOD + "expect: {allreduse: {1M: {busbw_gbps: 5}}}\n", "did you mean allreduce?"),
    conf("expect-bad-size", GOOD + "expect: {allreduce: {1Q: {busbw_gbps: 5}}}\n", "expect.allreduce.1Q: '1Q' is not a size"),
    conf("expect-unknown-metric", GOOD + "expect: {allreduce: {1M: {gbps: 5}}}\n", "allowed: busbw_gbps (GB/s floor), time_us (us ceiling)"),
    conf("expect-bad-grid", GOOD + "expect: {1x0: {allreduce: {1M: {time_us: 5}}}}\n", "expect.1x0: '1x0' is not a grid"),
    override("expect-override-negative", "expect.allreduce.1024.busbw_gbps: -1 is not allowed", "expect.allreduce.1024.busbw_gbps=-1"),
    override("tolerance-without-baseline", "only with --baseline", "--tolerance", "10%"),
    override("baseline-missing-dir", "not a directory", "--baseline", "{tmp}/nowhere"),
    override("baseline-no-results", "no passing run with bandwidth figures", "--baseline", "{out}"),
    override("baseline-bad-tolerance", "--tolerance '150%': out of range", "--baseline", "{out}", "--tolerance", "150%",
             command="bench"),
    # --- found by the bad-input audit: each was a traceback, a silent default, a file written or a run started
    conf("conf-grids-number", GOOD.replace("[1x2]", "5"), "grids: 5 is not a list of grids"),
    conf("conf-grid-twice", GOOD.replace("[1x2]", "[1x2, 2x1, 01x2]"), "grids[2]: '01x2' is listed twice (as '1x2')"),
    conf("conf-setups-list", "backend: gloo\ngrids: [1x2]\nsetups: [a, b]\n", "setups: ['a', 'b'] is not a mapping; allowed:"),
    conf("conf-nested-too-deep", GOOD + "probe: " + "{a: " * 200 + "1" + "}" * 200 + "\n", "nests deeper than 32 levels"),
    conf("conf-extra-args-number", GOOD + "launcher: mpirun\nlauncher_opts: {mpirun: {extra_args: 5}}\n",
         "launcher_opts.mpirun.extra_args: 5 is not a list"),
    conf("conf-host-empty", GOOD + "launcher: mpirun\nhosts: ['', n2]\n", "hosts[0]: '' is not a host name"),
    conf("conf-host-option", GOOD + "launcher: mpirun\nhosts: ['-oProxyCommand=x', n2]\n", "not starting with '-'"),
    conf("conf-host-twice", GOOD + "launcher: mpirun\nhosts: [n1, n1]\n", "hosts[1]: 'n1' is listed twice"),
    conf("conf-network-default-shaped", GOOD + "network: {default: {rate: 1gbit}}\n", "'default' is the unshaped condition"),
    override("ovr-probe-group-list", "'[1,2]' is not a probe; allowed: builtin", "probe=[1,2]"),
    override("ovr-probe-bench-text", "probe.bench: 'abc' is not a mapping", "probe.bench=abc"),
    override("ovr-grids-mapping", "grids: a value of the wrong kind; allowed: a list of grids", "grids={a:1}"),
    override("ovr-timeout-nan", "a finite number of seconds > 0", "probe.timeout_s=nan"),
    override("network-flag-empty", "--network '': no condition given", "--network", ""),
    override("network-flag-name-reads-as-value", "the name 'rate=1gbit' reads as a condition", "--network", "rate=1gbit:delay=1ms"),
    override("sweep-junit-directory", "--junit: ", "--junit", "{tmp}"),
    override("sweep-junit-in-proc", "--junit: '/proc/envmatrix-junit.xml' cannot be", "--junit", "/proc/envmatrix-junit.xml"),
    override("bench-size-beyond-memory", "this host has", "-e", "1T", command="bench"),
    override("bench-factor-never-grows", "never grows past 8 bytes", "-f", "1.01", command="bench"),
    # bench's flags are named as typed (was: "bench.bench.dtype", "bench.bench.collectives: '[]'", "bench: min_bytes")
    override("bench-dtype-flag", "-d/--dtype: 'float64' not allowed; allowed: float32", "-d", "float64", command="bench"),
    override("bench-collectives-flag", "-c/--collectives: 'allreduc' not allowed", "-c", "allreduc", command="bench"),
    override("bench-collectives-empty", "-c/--collectives: none given", "-c", "", command="bench"),
    override("bench-timing-flag", "--timing: 'graph' needs CUDA", "--timing", "graph", command="bench"),
    override("bench-min-above-max", "-b/--min-bytes 1M > -e/--max-bytes 1K", "-b", "1M", "-e", "1K", command="bench"),
    override("bench-step-too-many-sizes", "at most 4096 sizes", "-e", "64M", "-i", "1", command="bench"),
    override("bench-backends-twice", "a backend twice", "--backends", "gloo,gloo", command="bench"),
    override("bench-backends-none", "no backend", "--backends", ",", command="bench"),
    override("bench-pair-flag-alone", "--latency-size 0: only with --pairs", "--latency-size", "0", command="bench"),
    override("bench-pairs-with-network", "--network: not with --pairs hosts", "--pairs", "hosts", "--grid", "2x1",
             "--network", "r:rate=300mbit", command="bench"),
    override("bench-pairs-with-peers", "--peers: not with --pairs hosts", "--pairs", "hosts", "--grid", "2x1",
             "--peers", "rail", command="bench"),
    # a line break in what the user typed split the one-line message (override, argparse's stray word, a path)
    override("ovr-value-line-break", "override 'setups.a.NCCL_ALGO=Ring\\nTree': spans lines", "setups.a.NCCL_ALGO=Ring\nTree"),
    override("baseline-path-line-break", "x\\ny: not a directory", "--baseline", "{tmp}/x\ny"),
    Case("conf-name-line-break", ("sweep", "conf=c\n.yaml", "--out", "{out}"), "conf=c\\n.yaml: no such config file"),
    # -c was dropped without a word: --peers' rows replaced it, --pairs measures its own pairs
    override("bench-peers-with-collectives", "-c/--collectives allreduce: not with --peers rail", "--peers", "rail",
             "-c", "allreduce", "--grid", "2x1", command="bench"),
    override("bench-pairs-with-collectives", "-c/--collectives: not with --pairs hosts", "--pairs", "hosts", "--grid",
             "2x1", "-c", "allreduce", command="bench"),
    override("bench-grid-empty", "--grid: '' is not a grid", "--grid", "", command="bench"),
    envfile("bisect-json-directory", "export NCCL_ALGO=Ring\n", "is a directory", "--json", "{tmp}"),
    envfile("bisect-junit-under-file", "export NCCL_ALGO=Ring\n", "which is a file", "--junit", "{file:e.env}/x.xml"),
    envfile("bisect-setup-with-env-file", "export NCCL_ALGO=Ring\n", "--setup a: only with --failing", "--setup", "a"),
    Case("bisect-failing-empty", ("bisect", "--failing", "", "conf={file:c.yaml}", "--out", "{out}"), "--failing: '' is empty",
         {"c.yaml": GOOD}),
    Case("bisect-env-file-empty", ("bisect", "--env-file", "", "--out", "{out}"), "--env-file: '' is empty"),
    Case("versions-file-not-utf8", ("bisect", "--grid", "1x2", "--versions-file", "{file:v.txt}", "--out", "{out}"),
         "not UTF-8 text", {"v.txt": b"\xff\xfe/lib\n"}),
    Case("hosts-file-option-like", ("bisect", "--hosts", "{file:h.txt}", "launcher=mpirun", "--grid", "1x1", "--out", "{out}"),
         "not starting with '-'", {"h.txt": "-oProxyCommand=x\nn2\n"}),
    space("space-baseline-not-bool", "  baseline: maybe\n  space: {NCCL_ALGO: [Ring, Tree]}\n", "search.baseline: 'maybe'"),
    space("space-storage-empty", "  storage: ''\n  space: {NCCL_ALGO: [Ring, Tree]}\n", "search.storage: '' is empty"),
    space("space-study-name-empty", "  study_name: ''\n  space: {NCCL_ALGO: [Ring, Tree]}\n", "search.study_name='': is empty"),
    override("ovr-name-empty", "name='': is empty", "name=''"),
    space("space-trials-infinite", "  trials: .inf\n  space: {NCCL_ALGO: [Ring, Tree]}\n", "search.trials: inf"),
    space("space-heartbeat-grace-within-two-beats", "  heartbeat_interval_s: 10\n  heartbeat_grace_s: 15\n"
          "  space: {NCCL_ALGO: [Ring, Tree]}\n", "search.heartbeat_grace_s: 15 is not more than twice"),
    Case("search-bad-storage-no-run-dir", ("search", "conf={file:s.yaml}", "--out", "{tmp}/new"), "cannot open nosuch://x",
         {"s.yaml": "backend: gloo\ngrids: [1x2]\nsearch:\n  storage: nosuch://x\n  space: {TORCH_DISTRIBUTED_DEBUG: ['OFF', INFO]}\n"}),
    Case("export-storage-no-file", ("export", "--storage", "sqlite:///{tmp}/none.db"), "no database file"),
    Case("submit-script-directory", ("submit", "--script", "{tmp}", "--", "sweep"), "--script: "),
    Case("submit-directive-empty", ("submit", "--print", "--directive", "", "--", "sweep"), "--directive: '' is empty"),
    Case("submit-time-minutes-99", ("submit", "--print", "--time", "25:99:99", "--", "sweep"), "--time: '25:99:99'"),
    override("baseline-empty", "--baseline '': empty", "--baseline", ""),
    conf("conf-value-nul-byte", 'backend: gloo\ngrids: [1x2]\nsetups: {a: {MY_VAR: "a\\0b"}}\n', "contains a NUL byte",
         "--allow-unknown-vars", "--allow-ignored-vars"),
    envfile("bisect-version-mode-alone", "export NCCL_ALGO=Ring\n", "--version-mode preload: only with --versions",
            "--version-mode", "preload"),
    Case("submit-output-empty", ("submit", "--print", "--output", "", "--", "sweep"), "--output '': empty"),
    Case("report-output-directory", ("report", "{out}", "-o", "{tmp}"), "-o/--output: "),
    Case("report-output-under-file", ("report", "{out}", "-o", "{file:f}/r.html"), "which is a file", {"f": "x"}),
    Case("export-dest-file", ("export", "--out", "{out}", "--dest", "{file:f}"), "--dest '", {"f": "x"}),
    Case("export-dest-empty", ("export", "--out", "{out}", "--dest", ""), "--dest '': empty"),
    Case("submit-job-flag-typo", ("submit", "--print", "--", "sweep", "--dry-runn"), "sweep does not take --dry-runn"),
    override("ovr-probe-name-command", "probe.command: missing", "probe.name=command"),  # was: unknown key 'async_op'
    envfile("env-nul-byte", b"MY_VAR=a\x00b\n", "a NUL byte is not text", "--allow-unknown-vars", "--allow-ignored-vars"),
    # --- found by the second audit (hydra ~/+ overrides, probe and seed values)
    override("ovr-remove-backend", "override ~backend: removes the top-level key backend", "~backend"),  # was: KeyError
    override("ovr-remove-grids", "(grids=auto is the default)", "~grids"),  # was: KeyError traceback
    override("ovr-add-existing", "override +backend=gloo: backend is already set", "+backend=gloo"),  # named no override
    override("ovr-remove-missing", "override ~setups.zz: setups.zz is not set", "~setups.zz"),
    override("ovr-probe-command-number", "probe.command: 5 is not a command line", "probe=command", "probe.command=5"),  # was: TypeError
    override("ovr-probe-command-word-bool", "probe.command[0]: True is not a command-line word", "probe=command",
             "probe.command=[true,x]"),  # was: ran 'True x'
    override("ovr-extra-args-bool", "launcher_opts.mpirun.extra_args[1]: True is not a command-line word", "launcher=mpirun",
             "launcher_opts.mpirun.extra_args=[-v,true]"),  # was: mpirun ... -v True
    space("space-seed-beyond-numpy", "  seed: 4294967296\n  space: {NCCL_ALGO: [Ring, Tree]}\n",
          "search.seed: 4294967296 is out of range; allowed: an integer from 0 to 4294967295"),  # was: traceback, study.sqlite
    override("ovr-seed-negative", "seed: -1 is out of range", "seed=-1"),  # search took it as its seed: numpy's traceback
    override("ovr-max-local-ranks-zero", "max_local_ranks: 0 is out of range; allowed: an integer >= 1",
             "max_local_ranks=0"),  # was: 'grids: 1x2 starts 2 gloo ranks ...; allowed at most 0'
    conf("conf-probe-name-number", GOOD + "probe: {name: 5}\n", "probe.name: 5 is not a probe; allowed: builtin"),  # was:
    # 'Config group override must be a string or a list. Got int'; and 'In 'config': Could not find 'probe/comand''
    conf("conf-probe-name-typo", GOOD + "probe: {name: comand}\n", "probe.name: 'comand' is not a probe (did you mean command?)"),
    conf("conf-setup-name-number", GOOD.replace("  a:", "  5:"), "setups.5: the key 5 is a number; allowed: text keys"),
    conf("conf-hermetic-number", GOOD + "hermetic: 5\n", "hermetic: 5 is not true or false"),  # was: taken as true
    override("ovr-allow-ignored-number", "allow_ignored_vars: 2 is not true or false", "allow_ignored_vars=2"),
    override("ovr-name-bool", "name: true is true/false, not text", "name=true"),  # was: a run directory named True
    # a repeat would run twice (collectives) or the later would win without a word (--env), as grids and hosts refuse
    override("bench-env-twice", "NCCL_ALGO is given twice (first --env NCCL_ALGO=Ring)", "--env", "NCCL_ALGO=Ring",
             "--env", "NCCL_ALGO=Tree", command="bench"),
    override("bench-collective-twice", "collectives[1]: 'allreduce' is listed twice", "-c", "allreduce,allreduce",
             command="bench"),
    override("ovr-probe-collective-twice", "probe.collectives[1]: 'allgather' is listed twice",
             "probe.collectives=[allgather,allgather]"),
    override("ovr-probe-numel-bool", "probe.numel: True not allowed", "probe.numel=true"),  # was: numel True ran as 1
    # probe values of the wrong kind: TypeError tracebacks (exit 1), or text read letter by letter / exported as a list
    override("ovr-probe-collectives-null", "probe.collectives: None is not a list", "probe.collectives=null"),
    override("ovr-probe-forbid-transport-number", "probe.forbid_transport: 5 is not a list", "probe.forbid_transport=5"),
    override("ovr-probe-forbid-transport-typo", "probe.forbid_transport[0]: 'NTE' is not a transport (did you mean NET?)",
             "probe.forbid_transport=[NTE]"),
    override("ovr-probe-debug-subsys-number", "probe.nccl_debug_subsys: 5 not allowed", "probe.nccl_debug_subsys=5"),
    override("ovr-probe-bench-factor-text", "probe.bench.factor: 'abc' is not a number", "probe.bench={factor:abc}"),
    override("ovr-command-probe-debug-level", "probe.nccl_debug: 'LOUD' not allowed", "probe=command",
             "probe.command=/bin/true", "probe.nccl_debug=LOUD"),
    # a stall on a rank no grid has never fires: the sweep passed as if the fault had been injected and survived
    override("ovr-netpair-pair-beyond-grids", "probe.pairs[0]: [0, 9] names rank 9, on no grid (1x2: ranks 0..1)",
             "probe=netpair", "probe.pairs=[[0,9]]"),  # was: a run failed as a network error, exit 1
    override("ovr-probe-stall-rank-beyond-grids", "probe.stall: rank 5 is on no grid (1x2: ranks 0..1); allowed: a rank below 2",
             "probe.stall={rank:5,seq:1}"),
    # bisect's grid flags were checked only as the grids=[...] override they become: the message named grids[0]
    Case("bisect-failing-not-a-grid", ("bisect", "--failing", "garbage", "conf={file:c.yaml}", "--out", "{out}"),
         "--failing: 'garbage' is not a grid", {"c.yaml": GOOD}),
    envfile("bisect-grid-two-grids", "export NCCL_ALGO=Ring\n", "--grid: '1x2,2x1' is not a grid", "--grid", "1x2,2x1"),
    conf("conf-yes-is-text", GOOD.replace("NCCL_ALGO: Ring", "NCCL_IB_DISABLE: yes"), "value 'yes' for NCCL_IB_DISABLE",
         "--allow-ignored-vars"),  # was: YAML 1.1's boolean, exported as NCCL_IB_DISABLE=1
    conf("conf-defaults-empty-entry", "defaults: ['']\n" + GOOD, "defaults entry '' can't be honoured"),  # was: default.yaml
    conf("conf-defaults-twice", "defaults: [default, default]\n" + GOOD, "defaults[1]: 'default' is listed twice"),
    conf("conf-seed-text", GOOD + "seed: abc\n", "c.yaml: seed: Value 'abc'"),  # was: 'override seed: ...' for the file's value
    Case("submit-output-two-lines", ("submit", "--print", "--output", "a\n#SBATCH --x", "--", "sweep"),
         "--output: 'a\\n#SBATCH --x' spans lines"),  # was: its second line printed as a directive of its own
    # the netpair probe's own values: unchecked, they reached ping and iperf3 (port 0 / 70000 / true, ping -c 0)
    override("ovr-netpair-port", "probe.port: 70000 is out of range; allowed: an integer from 1 to 65535", "probe=netpair",
             "probe.port=70000"),
    override("ovr-netpair-ping-count", "probe.ping_count: 0 is out of range", "probe=netpair", "probe.ping_count=0"),
    override("ovr-netpair-pair-text", "probe.pairs[0]: 'x' is not an integer", "probe=netpair",
             "probe.pairs=[[x,y]]"),  # was: ValueError traceback
    override("ovr-netpair-address-option", "probe.addresses[0]: '-oProxy' is not a host name", "probe=netpair",
             "probe.addresses=[-oProxy,b]"),
    # an objective the probe's bench never measures: every trial failed with no_metric, and the search exited 0
    space("space-objective-not-measured", "  space: {NCCL_ALGO: [Ring, Tree]}\n  objective: {collective: alltoall}\n",
          "objective.collective: 'alltoall' is not measured by probe.bench; allowed: allreduce"),
    space("space-objective-size-beyond-bench", "  space: {NCCL_ALGO: [Ring, Tree]}\n  objective: {size: 1M}\n",
          "objective.size: 1M is larger than probe.bench measures (4K)"),
    space("space-objective-no-sizes", "  space: {NCCL_ALGO: [Ring, Tree]}\n  objective: {sizes: []}\n",
          "objective.sizes: [] is empty"),
    space("space-objective-collective-twice", "  space: {NCCL_ALGO: [Ring, Tree]}\n  objective: {collectives: [allreduce, allreduce]}\n",
          "objective.collectives[1]: 'allreduce' is listed twice"),
    override("ovr-whole-mapping-typo", "network.a: unknown key 'delai' (did you mean delay?)",
             "network={a:{delai:1ms}}"),  # was: "overrides: unknown key 'a'; allowed: name, backend, ..."
    override("ovr-whole-mapping-number-key", "override setups={5:{X:1}}: setups.5: the key 5 is a number", "setups={5:{X:1}}"),
    conf("conf-hex-value-is-text", GOOD.replace("NCCL_ALGO: Ring", "NCCL_BUFFSIZE: 0x100"), "value '0x100' for NCCL_BUFFSIZE",
         "--allow-ignored-vars"),  # was: YAML 1.1's hex integer, exported as NCCL_BUFFSIZE=256
    conf("conf-tag-text-mismatch", GOOD + "seed: !!int abc\n", "malformed YAML (invalid literal for int()"),  # was: ValueError
    override("ovr-stray-word", "override bakend: not KEY=VALUE (did you mean backend?)", "bakend"),  # was: Hydra's
    # 'missing EQUAL at <EOF>' and "quote the value so it passes literally: bakend=''"
    Case("submit-job-override-typo", ("submit", "--print", "--", "sweep", "bakend=gloo"),
         "override bakend=gloo: unknown key 'bakend' (did you mean backend?)"),  # was: the script, failing in the queue
    Case("report-corrupt-study", ("report", "{tmp}/r"), "cannot open sqlite:///",
         {"r/study.sqlite": b"\x13\x37 not a study" * 50}),  # was: sqlalchemy's DatabaseError traceback, exit 1
    # someone else's SQLite database where a store or study is looked for: envmatrix's or Optuna's tables were added to it,
    # by report and diff (readers) too
    Case("store-foreign-db-report", ("report", "{tmp}/r"), "corrupt store (an SQLite database without envmatrix's tables; "
         "it holds foo)", {"r/results.sqlite": FOREIGN_DB}),
    Case("store-foreign-db-sweep", ("sweep", "conf={file:c.yaml}", "--out", "{tmp}/r"), "without envmatrix's tables",
         {"c.yaml": GOOD, "r/results.sqlite": FOREIGN_DB}),
    Case("study-foreign-db-export", ("export", "--out", "{tmp}/r"), "without Optuna's tables (it holds foo)",
         {"r/study.sqlite": FOREIGN_DB}),
    Case("store-other-layout-sweep", ("sweep", "conf={file:c.yaml}", "--out", "{tmp}/r"),
         "corrupt store (not envmatrix's layout: no table sweeps)", {"c.yaml": GOOD, "r/results.sqlite": OTHER_LAYOUT_DB}),
    Case("store-other-layout-report", ("report", "{tmp}/r"), "corrupt store (not envmatrix's layout: no table sweeps)",
         {"r/results.sqlite": OTHER_LAYOUT_DB}),
    # an output path naming an input: report -o RUN/results.sqlite wrote HTML over the store, submit --script over a config
    Case("report-output-over-store", ("report", "{out}", "-o", "{out}/results.sqlite"),
         "already holds a file that is not an HTML file (it starts b'SQLite format 3"),
    override("sweep-junit-over-config", "already holds a file that is not a JUnit XML file", "--junit", "{file:c.yaml}"),
    envfile("bisect-json-over-env-file", "export NCCL_ALGO=Ring\n", "already holds a file that is not a JSON file",
            "--json", "{file:e.env}"),
    Case("submit-script-over-config", ("submit", "--script", "{file:c.yaml}", "--", "sweep"),
         "already holds a file that is not a batch script file", {"c.yaml": GOOD}),
]


def _fill(arg: str, tmp: Path, out: Path) -> str:
    arg = arg.replace("{out}", str(out)).replace("{tmp}", str(tmp))
    while "{file:" in arg:
        start = arg.index("{file:")
        end = arg.index("}", start)
        arg = arg[:start] + str(tmp / arg[start + 6:end]) + arg[end + 1:]
    return arg


# The module fixture runs every case (about 90 CLI starts, two at a time) inside the first test's timeout: about
# 2 minutes on an idle 2-core machine, over 5 under heavy load. The limit scales with that, not with one case.
# One xdist worker runs the module, so the corpus runs once (the fixture is per worker); slow: over a minute.
pytestmark = [pytest.mark.timeout(1800), pytest.mark.slow, pytest.mark.xdist_group("bad_inputs")]

def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else b"<dir>") for p in sorted(root.rglob("*"))}


@pytest.fixture(scope="module")
def pristine_store(tmp_path_factory) -> bytes:
    from envmatrix.store.sqlite import SqliteStore

    path = tmp_path_factory.mktemp("store") / "results.sqlite"
    store = SqliteStore(str(path))
    store.open_sweep("earlier", {"config": {"name": "earlier"}})
    store.close()
    return path.read_bytes()


def _run_case(case: Case, root: Path, store_bytes: bytes) -> tuple[Case, subprocess.CompletedProcess, Path]:
    tmp = root / case.id
    out = tmp / "out"
    out.mkdir(parents=True)
    (out / "results.sqlite").write_bytes(store_bytes)
    for name, content in case.files.items():
        path = tmp / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content) if isinstance(content, bytes) else path.write_text(content)
    env = {**os.environ, "COLUMNS": "200", "PYTHONUNBUFFERED": "1", **case.env}
    env = {k: v for k, v in env.items() if v is not None}  # None: not set for this case
    proc = subprocess.run([sys.executable, "-m", "envmatrix", *(_fill(a, tmp, out) for a in case.argv)],
                          cwd=tmp, env=env, capture_output=True, text=True, timeout=600)
    return case, proc, tmp


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory, pristine_store):
    """All cases at once (two at a time: the CI machine has two cores); each test then checks its own."""
    root = tmp_path_factory.mktemp("bad")
    snapshots: dict[str, dict[str, bytes]] = {}
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = {c.id: r for c, r in zip(CASES, pool.map(lambda c: _run_case(c, root, pristine_store), CASES))}
    # The before-state: the same files written into a reference directory no command touched.
    for case in CASES:
        ref = root / "_ref" / case.id
        ref.mkdir(parents=True)
        (ref / "out").mkdir()
        (ref / "out" / "results.sqlite").write_bytes(pristine_store)
        for name, content in case.files.items():
            path = ref / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content) if isinstance(content, bytes) else path.write_text(content)
        snapshots[case.id] = _snapshot(ref)
    return results, snapshots


def test_corpus_is_large_and_ids_unique():
    assert len(CASES) >= 50
    assert len({c.id for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input(case, outcomes):
    results, snapshots = outcomes
    _, proc, tmp = results[case.id]
    both = proc.stdout + proc.stderr
    assert "Traceback" not in both, both
    assert proc.returncode == case.code, both
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("envmatrix: error: "), proc.stderr
    assert case.expect in lines[0], lines[0]
    assert _snapshot(tmp) == snapshots[case.id], "bad input changed or wrote files"
    assert not (tmp / PWNED).exists()


def _options_of(command: str) -> set[str]:
    from envmatrix.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._subparsers._group_actions if a.choices)  # noqa: SLF001 - argparse has no public walk
    return {opt for action in sub.choices[command]._actions for opt in action.option_strings}  # noqa: SLF001


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_a_flag_the_message_suggests_is_one_the_command_accepts(case, outcomes):
    results, _ = outcomes
    _, proc, _ = results[case.id]
    # a flag the user typed is named as the bad value (submit's job flags), not suggested
    named = set(re.findall(r"(?<![\w-])--[a-z][a-z-]+", proc.stderr)) - set(case.argv)
    assert named <= _options_of(case.argv[0]) | {"--help", "--debug"}, proc.stderr


def test_an_output_path_that_goes_bad_during_the_run_is_reported_not_raised(tmp_path):
    from envmatrix.app.outputs import write_run_outputs

    out = write_run_outputs(str(tmp_path), "/proc/envmatrix-none/x.xml", "suite", [], [])
    assert out.junit is None and out.junit_error and out.junit_error.split(":")[0].endswith("Error")
