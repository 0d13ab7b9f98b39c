"""README's samples and flag lists are what the installed tool really prints and takes (a new user's QA pass).

The bench sample's count column is the one bench prints (nccl-tests' per-rank count), the bisect sample is the
output of the command it shows (run here on real gloo ranks), and the sweep flag list names every sweep flag.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from envmatrix.bench.formulas import collective_spec
from envmatrix.bench.sizes import DTYPE_BYTES, printed_count
from envmatrix.cli import build_parser, main

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")


def sample_after(command_prefix: str) -> list[str]:
    """The lines of README's code block that follow the line starting with ``$ command_prefix``, to the fence."""
    lines = README.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"$ {command_prefix}"))
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("```"))
    return lines[start:end]


def test_readme_bench_sample_counts_are_the_per_rank_counts_bench_prints():
    block = sample_after("envmatrix bench backend=gloo --grid")
    nodes, per_node = re.search(r"--grid (\d+)x(\d+)", block[0]).groups()
    ranks = int(nodes) * int(per_node)
    collective, rows = None, 0
    for line in block[1:]:
        header = re.match(r"## (\w+) \(", line)
        if header:
            collective = header.group(1)
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) < 3 or not cells[0].isdigit():
            continue
        size, count, dtype = int(cells[0]), int(cells[1]), cells[2]
        elements = size // DTYPE_BYTES[dtype]
        expected = printed_count(elements, ranks, collective_spec(collective).split_by_ranks)
        assert count == expected, f"README bench sample: {collective} {size} B on {ranks} ranks prints count {expected}"
        rows += 1
    assert rows >= 3


def sweep_parser() -> argparse.ArgumentParser:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices["sweep"]


def test_readme_sweep_flag_list_names_every_sweep_flag():
    start = README.index("Sweep's flags")
    paragraph = README[start:README.index("\n\n", start)]
    flags = {s for a in sweep_parser()._actions for s in a.option_strings if s.startswith("--") and s != "--help"}
    missing = sorted(f for f in flags if not re.search(rf"`{re.escape(f)}[` ]", paragraph))
    assert not missing, f"README's sweep flag list leaves out {missing}"


def test_readme_search_line_claims_tuner_csv_only_for_a_space_that_can_make_one():
    line = next(x for x in README.splitlines() if x.startswith("envmatrix search conf=search_demo"))
    space = (REPO / "conf" / "search_demo.yaml").read_text(encoding="utf-8")
    if "tuner.csv" in line:
        assert "NCCL_ALGO" in space or "NCCL_PROTO" in space, "search_demo's gloo space never makes a tuner.csv"


@pytest.mark.slow
def test_readme_bisect_sample_is_what_the_command_prints(tmp_path):
    block = sample_after("cat tiny_bad.env")
    env_lines = [line for line in block[1:] if line.startswith("export ")]
    (tmp_path / "tiny_bad.env").write_text("\n".join(env_lines) + "\n")
    command = next(line for line in block if line.startswith("$ envmatrix bisect"))[2:].split()
    env = {**os.environ, "COLUMNS": "200"}
    proc = subprocess.run([sys.executable, "-m", "envmatrix", *command[1:], "--out", str(tmp_path / "run")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stderr[-2000:]
    printed = [" ".join(line.split()) for line in proc.stdout.splitlines()]
    for expected in block:
        if expected.startswith(("Probes launched", " grid ", " 1x2 ")):
            assert " ".join(expected.split()) in printed, f"README bisect sample line not printed: {expected!r}"


def test_clusters_dry_run_sample_is_what_the_dry_run_prints(tmp_path, monkeypatch, capsys):
    page = (REPO / "docs" / "clusters.md").read_text(encoding="utf-8")
    command = re.search(r"^(envmatrix sweep conf=aws_ofi launcher=mpirun 'hosts=.*--dry-run)$", page, re.M).group(1)
    sample = re.search(r"one run of the dry run above is.*?```\n(.*?)```", page, re.S).group(1)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "400")
    argv = [w.strip("'") for w in command.split()[1:]]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    key = re.search(r"logs/2x4_0_([0-9a-f]+)/", sample).group(1)
    real_key = re.search(r"logs/2x4_0_([0-9a-f]+)/dry-run", printed).group(1)
    words = sample.replace("/home/me", str(tmp_path)).replace(key, real_key).split()
    words = words[:words.index("...")] if "..." in words else words
    lines = [line.split() for line in printed.splitlines()]
    mkdir = words[:words.index("cd")]
    launch = words[words.index("cd"):]
    assert mkdir in lines, f"docs/clusters.md: {' '.join(mkdir)!r} is not printed"
    assert any(line[:len(launch)] == launch for line in lines), f"docs/clusters.md: {' '.join(launch)!r} not printed"
