"""Shared pieces of the search tests: the fake nccl-tests config and a CLI runner."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

DATA = Path(__file__).parent / "data" / "search"
FAKE = DATA / "fake_nccl_tests.py"
BEST_1M = {"NCCL_ALGO": "Ring", "NCCL_PROTO": "LL128", "NCCL_MAX_NCHANNELS": "8"}


def fake_conf(path: Path, forbid: bool = True, extra: str = "") -> Path:
    forbid_line = "  forbid: [{NCCL_ALGO: Tree, NCCL_PROTO: LL128}]\n" if forbid else ""
    path.write_text(
        f"""
name: fake
backend: gloo
grids: [1x1]
probe: {{name: command, timeout_s: 60, command: [{sys.executable}, {FAKE}]}}
search:
  trials: 12
  seed: 0
  space: {{NCCL_ALGO: [Ring, Tree], NCCL_PROTO: all, NCCL_MAX_NCHANNELS: [2, 4, 8]}}
  fixed: {{NCCL_BUFFSIZE: 4194304}}
{forbid_line}  objective: {{collective: allreduce, size: 1M}}
{extra}"""
    )
    return path


def gloo_bench_search_conf(path: Path, name: str, search_keys: str) -> Path:
    """Two bruteforce trials of the builtin probe's allreduce bench (4K-16K) on gloo 1x2, objective its 16K busbw;
    ``search_keys``: the rest of the ``search:`` block, each line indented by two spaces."""
    path.write_text(
        f"""
name: {name}
backend: gloo
grids: [1x2]
probe:
  timeout_s: 120
  collectives: [allreduce]
  bench: {{collectives: [allreduce], min_bytes: 4K, max_bytes: 16K, factor: 4, iters: 3, warmup: 1}}
search:
  trials: 2
  sampler: bruteforce
{search_keys}
  objective: {{collective: allreduce, size: 16K}}
"""
    )
    return path


def search_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "envmatrix", *args]


def run_search(cli, *args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run(search_argv(*args), cwd=cli.cwd, env=cli.env, capture_output=True, text=True, timeout=timeout)


def load(run_dir: Path, name: str = "fake"):
    import optuna

    return optuna.load_study(study_name=name, storage=f"sqlite:///{run_dir / 'study.sqlite'}")
