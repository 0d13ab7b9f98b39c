"""One tiny gloo setup through sweep, bisect, search and bench (real CLI, real ranks): every command
stores its results through the engine, so the stored records carry the same fields, host facts included."""

from __future__ import annotations

import json
import sqlite3

import pytest

pytestmark = pytest.mark.slow

CONF = """
name: contract
backend: gloo
grids: [1x2]
setups:
  tiny: {TORCH_DISTRIBUTED_DEBUG: "OFF"}
probe:
  timeout_s: 60
  collectives: [allreduce]
  bench: {collectives: [allreduce], min_bytes: 1K, max_bytes: 1K, iters: 2, warmup: 1}
search:
  trials: 1
  sampler: bruteforce
  baseline: false
  confirm_top_k: 0
  space: {TORCH_DISTRIBUTED_DEBUG: ["OFF"]}
  objective: {collective: allreduce, size: 1K}
"""

# One harmless atom and one that breaks gloo here: bisect has a culprit to find.
ENV_FILE = "export TORCH_DISTRIBUTED_DEBUG=OFF\nexport GLOO_SOCKET_IFNAME=envmx_missing0\n"


def _stored(run_dir) -> list[dict]:
    with sqlite3.connect(run_dir / "results.sqlite") as db:
        return [json.loads(row[0]) for row in db.execute("SELECT result_json FROM results ORDER BY seq")]


def _shape(record: dict) -> dict:
    """What a reader of the store may rely on: field names, per-rank field names, host fact names."""
    return {
        "fields": sorted(record),
        "rank_fields": sorted({k for rank in record["ranks"] for k in rank}),
        "host_facts": sorted(record["host"]),
    }


def test_every_command_stores_the_same_fields(cli, tmp_path):
    conf = tmp_path / "contract.yaml"
    conf.write_text(CONF)
    (tmp_path / "env.sh").write_text(ENV_FILE)
    commands = {
        "sweep": (0, ["sweep", f"conf={conf}"]),
        "bisect": (1, ["bisect", f"conf={conf}", "--grid", "1x2", "--env-file", str(tmp_path / "env.sh")]),
        "search": (0, ["search", f"conf={conf}"]),
        "bench": (0, ["bench", "backend=gloo", "--grid", "1x2", "-b", "1K", "-e", "1K", "-c", "allreduce", "-n", "2", "-w", "1"]),
    }
    records = {}
    for name, (code, argv) in commands.items():
        out = tmp_path / name
        done = cli.run(*argv, "--out", str(out))
        assert done.returncode == code, (name, done.stdout[-2000:], done.stderr[-2000:])
        records[name] = _stored(out)
        assert records[name], f"{name} stored nothing"
    reference = _shape(records["sweep"][0])
    assert reference["host_facts"], "the sweep's record names no host facts"
    for name, stored in records.items():
        for record in stored:
            assert _shape(record) == reference, (name, record["setup"].get("name"))
            assert record["sweep_id"], (name, "no sweep id")
            assert record["host"] == records["sweep"][0]["host"], (name, "host facts differ on one host")
    # the bisect stored both outcomes, so the failing records are checked too
    assert {r["outcome"] for r in records["bisect"]} >= {"pass"} and any(r["outcome"] != "pass" for r in records["bisect"])
