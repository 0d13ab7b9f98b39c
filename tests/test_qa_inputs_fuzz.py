"""Bad input from a fuzzer's side (QA pass): mutated configs, overrides and flags, run through the real ``main`` in
this process. The rule for each: exit 2, exactly one ``envmatrix ...: error:`` line on stderr naming the key or
value, no traceback, and nothing written in the directory it ran in (snapshot before and after). A mutation that is
still a valid config may pass (exit 0, a dry run writes nothing); anything else (an exception, another exit code, a
second line, a written file) is a defect. The systematic mutation sweep is slow (about 900 configs); the cases it
found stand alone below, each fast."""

from __future__ import annotations

import copy
import os
from pathlib import Path

import pytest
import yaml

GOOD = "backend: gloo\ngrids: [1x2]\nsetups:\n  a: {NCCL_ALGO: Ring}\n"


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else b"<dir>") for p in sorted(root.rglob("*"))}


def _main(tmp_path: Path, capsys, argv: list[str], files: dict | None = None) -> tuple[object, str, str, dict, dict]:
    """(exit code, stdout, stderr, files before, files after) of ``envmatrix argv`` run in ``tmp_path``; ``{tmp}``
    in argv is ``tmp_path``. An exception out of main is the test's failure (a traceback for the user)."""
    from envmatrix.cli import main

    for name, content in (files or {}).items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content) if isinstance(content, bytes) else path.write_text(content)
    before = _snapshot(tmp_path)
    capsys.readouterr()
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        code = main([a.replace("{tmp}", str(tmp_path)) for a in argv])
    except SystemExit as exc:  # argparse's own refusals
        code = exc.code
    finally:
        os.chdir(cwd)
    out, err = capsys.readouterr()
    return code, out, err, before, _snapshot(tmp_path)


def refused(tmp_path: Path, capsys, argv: list[str], files: dict | None = None) -> str:
    """The one error line of a refused input; asserts the whole rule."""
    code, out, err, before, after = _main(tmp_path, capsys, argv, files)
    assert "Traceback" not in out + err, err
    assert code == 2, (code, out[-2000:], err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and " error: " in lines[0], err
    assert after == before, "bad input wrote or changed files"
    return lines[0]


SWEEP = ["sweep", "conf={tmp}/c.yaml", "--dry-run", "--allow-ignored-vars", "--out", "{tmp}/out"]


# ---- the systematic sweep: every value of a rich valid config replaced by each wrong kind, an unknown key at each level

BASE = {
    "name": "fz", "description": "fuzz base", "backend": "gloo", "grids": ["1x2", "2x1"], "seed": 3,
    "max_local_ranks": 8, "allow_ignored_vars": False, "hermetic": False, "launcher": "local",
    "setups": {"a": {"NCCL_ALGO": "Ring", "GLOO_DEVICE_TRANSPORT": "TCP"}, "b": {"TORCH_DISTRIBUTED_DEBUG": "INFO"}},
    "strategies": [{"kind": "leave_out", "base": "a", "vars": ["NCCL_ALGO", "GLOO_DEVICE_TRANSPORT"]},
                   {"kind": "product", "vars": {"TORCH_DISTRIBUTED_DEBUG": ["OFF", "INFO"]}, "name": "p_"}],
    "probe": {"timeout_s": 60, "grace_s": 5, "numel": 1024, "collectives": ["allreduce"],
              "bench": {"collectives": ["allreduce"], "min_bytes": "4K", "max_bytes": "64K", "factor": 4, "iters": 5,
                        "warmup": 1}},
    "expect": {"allreduce": {"4K": {"busbw_gbps": 0.001}}},
    "network": {"b1": {"rate": "1gbit"}},
    "network_options": {"ingress": False},
    "launcher_opts": {"mpirun": {"extra_args": ["-v"]}},
}
WRONG = {"list": ["x"], "empty-list": [], "mapping": {"k": 1}, "empty-mapping": {}, "text": "abc", "negative": -1, "zero": 0,
         "huge": 10**30, "nan": float("nan"), "inf": float("inf"), "true": True, "null": None, "fraction": 2.5,
         "grid-like": "0x2", "empty-text": ""}


def _paths(node, prefix=()):
    if isinstance(node, dict):
        for key, value in node.items():
            yield prefix + (key,)
            yield from _paths(value, prefix + (key,))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield prefix + (i,)
            yield from _paths(value, prefix + (i,))


def _replaced(path, value):
    root = copy.deepcopy(BASE)
    node = root
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return root


def _mutants(top: str):
    """(label, config, a word the refusal must name) for each mutation under the top-level key ``top``."""
    for path in (p for p in _paths(BASE) if p[0] == top):
        named = next(str(p) for p in reversed(path) if isinstance(p, str))  # a list index is named by its list
        for kind, value in WRONG.items():
            yield f"{'.'.join(map(str, path))}={kind}", _replaced(path, value), named
        if isinstance(_value_at(path), dict):
            yield f"{'.'.join(map(str, path))}+unknown", _replaced(path + ("zz_unknown",), 1), "zz_unknown"


def _value_at(path):
    node = BASE
    for part in path:
        node = node[part]
    return node


def test_the_base_config_of_the_sweep_is_valid(tmp_path, capsys):
    code, _, err, before, after = _main(tmp_path, capsys, SWEEP, {"c.yaml": yaml.safe_dump(BASE)})
    assert code == 0 and after == before, err


@pytest.mark.slow  # about 900 in-process dry runs: a minute or more on the 2-core box
@pytest.mark.parametrize("top", [*BASE, "(top level)"])
def test_every_mutation_of_a_valid_config_passes_or_is_one_line_naming_its_key(tmp_path, capsys, top):
    mutants = list(_mutants(top)) if top in BASE else [("+unknown", {**BASE, "zz_unknown": 1}, "zz_unknown")]
    broken = []
    for i, (label, conf, named) in enumerate(mutants):
        where = tmp_path / str(i)
        where.mkdir()
        try:
            code, out, err, before, after = _main(where, capsys, SWEEP, {"c.yaml": yaml.safe_dump(conf)})
        except Exception as exc:  # noqa: BLE001 - what the user would see as a traceback
            broken.append(f"{label}: {type(exc).__name__}: {exc}")
            continue
        lines = err.strip().splitlines()
        if after != before:
            broken.append(f"{label}: wrote {sorted(set(after) ^ set(before))[:3]}")
        elif code == 2 and (len(lines) != 1 or named not in lines[0]):
            broken.append(f"{label}: {err.strip()!r} does not name {named!r} in one line")
        elif code not in (0, 2) or "Traceback" in out + err:
            broken.append(f"{label}: exit {code}: {err.strip()[-300:]!r}")
    assert not broken, "\n".join(broken)


# ---- overrides after the flags


def test_a_key_removal_after_the_flags_is_an_override_as_before_them(tmp_path, capsys):
    # argparse leaves words after the flags to main, which took only KEY=VALUE as overrides: '~setups.b' after
    # --dry-run was refused as 'unrecognized arguments', the same word before the flags removed setup b
    conf = GOOD + "  b: {NCCL_PROTO: Simple}\n"
    code, out, err, before, after = _main(tmp_path, capsys, [*SWEEP, "~setups.b"], {"c.yaml": conf})
    assert code == 0, err
    assert "(a)" in out and "(b)" not in out and after == before
    line = refused(tmp_path, capsys, [*SWEEP, "~setups.zz"])
    assert "override ~setups.zz: setups.zz is not set" in line
    # a stray word after the flags gets compose's answer (the override, its did-you-mean), not argparse's
    assert "override bakend: not KEY=VALUE (did you mean backend?)" in refused(tmp_path, capsys, [*SWEEP, "bakend"])


# ---- probe.bench values that reached Python's int() or a hash as they were: tracebacks, exit 1


@pytest.mark.parametrize("text,expect", [
    ("probe: {bench: {factor: .nan}}\n", "probe.bench.factor: nan is not a finite number; allowed: a number > 1"),
    ("probe: {bench: {factor: .inf}}\n", "probe.bench.factor: inf is not a finite number"),  # was: OverflowError
    ("probe: {bench: {collectives: [[allreduce]]}}\n", "probe.bench.collectives: ['allreduce'] not allowed"),
    ("probe: {bench: {collectives: [allreduce, {a: 1}]}}\n", "probe.bench.collectives: {'a': 1} not allowed"),
], ids=["factor-nan", "factor-inf", "collective-list", "collective-mapping"])
def test_a_bench_value_python_cannot_take_is_one_line(tmp_path, capsys, text, expect):
    assert expect in refused(tmp_path, capsys, SWEEP, {"c.yaml": GOOD + text})


def test_a_bench_factor_override_of_nan_is_one_line(tmp_path, capsys):
    line = refused(tmp_path, capsys, [*SWEEP, "probe.bench.factor=nan"], {"c.yaml": GOOD})
    assert "probe.bench.factor: nan is not a finite number" in line  # was: ValueError traceback


def test_a_bench_of_zero_is_refused_not_read_as_false(tmp_path, capsys):
    # 0 == False in Python: 'bench: 0' ran with no bench at all, where 'bench: 1' was refused as no mapping
    line = refused(tmp_path, capsys, SWEEP, {"c.yaml": GOOD + "probe: {bench: 0}\n"})
    assert "probe.bench: 0 is not a mapping; allowed: true, or a mapping" in line


def test_a_command_line_holding_a_nul_byte_is_refused_before_any_launch(tmp_path, capsys):
    # the list form was refused; the one-string form passed shlex, and each run failed as launch_error 'ValueError:
    # embedded null byte', stored in a new run directory, exit 1
    conf = GOOD + 'probe: {name: command, command: "/bin/true a\\0b"}\n'
    line = refused(tmp_path, capsys, SWEEP, {"c.yaml": conf})
    assert "probe.command: '/bin/true a\\x00b' contains a NUL byte; allowed: text without NUL" in line


@pytest.mark.parametrize("text,expect", [
    ("probe: {collectives: {allreduce: 1}}\n", "c.yaml: probe.collectives: {'allreduce': 1} is not a list; allowed: a list"),
    ("probe: {forbid_transport: {NET: 1}}\n", "c.yaml: probe.forbid_transport: {'NET': 1} is not a list"),
], ids=["collectives", "forbid_transport"])
def test_a_mapping_where_the_probe_takes_a_list_names_the_key(tmp_path, capsys, text, expect):
    # Hydra cannot merge it into the probe group's list and named no key: 'c.yaml: (top level): a value of the wrong
    # kind; allowed: a value of the kind the schema gives it'
    assert expect in refused(tmp_path, capsys, SWEEP, {"c.yaml": GOOD + text})


def test_a_yaml_complex_key_is_malformed_yaml_with_its_line(tmp_path, capsys):
    # '? [a, b]' makes a list a mapping key: the duplicate-key check hashed it (TypeError traceback)
    conf = "backend: gloo\ngrids: [1x2]\nsetups:\n  ? [a, b]\n  : {NCCL_ALGO: Ring}\n"
    line = refused(tmp_path, capsys, SWEEP, {"c.yaml": conf})
    assert "c.yaml:4:5: malformed YAML (found unhashable key)" in line


def test_a_batch_job_removing_a_key_the_schema_lacks_is_refused_before_the_queue(tmp_path, capsys):
    # submit checks the job's override key names, but only KEY=VALUE ones: '~bakend' went into the script, and the
    # job failed in the queue on it
    line = refused(tmp_path, capsys, ["submit", "--print", "--", "sweep", "~bakend"])
    assert "override ~bakend: unknown key 'bakend' (did you mean backend?)" in line


@pytest.mark.parametrize("argv,expect", [
    (["report", "{tmp}/r"], "report: {tmp}/r: no results.sqlite, results.json"),
    (["diff", "{tmp}/r", "{tmp}/r"], "diff: {tmp}/r: no results (results.sqlite or results.json)"),
], ids=["report", "diff"])
def test_an_empty_store_file_is_no_store_and_the_reader_leaves_it_empty(tmp_path, capsys, argv, expect):
    # SQLite opens a 0-byte file as a new database: report and diff (readers) wrote envmatrix's tables into it (32 KB)
    line = refused(tmp_path, capsys, argv, {"r/results.sqlite": b""})
    assert expect.replace("{tmp}", str(tmp_path)) in line
    assert (tmp_path / "r" / "results.sqlite").read_bytes() == b""


@pytest.mark.parametrize("metric", ["busbw_gbps", "time_us"])
def test_an_infinite_expectation_is_refused(tmp_path, capsys, metric):
    # .inf passed the '> 0' check: a busbw floor no run meets (every cell slow, exit 1), a time ceiling judging nothing
    line = refused(tmp_path, capsys, SWEEP, {"c.yaml": GOOD + f"expect: {{allreduce: {{4K: {{{metric}: .inf}}}}}}\n"})
    assert f"expect.allreduce.4K.{metric}: inf is not allowed; allowed: a number > 0" in line


@pytest.mark.parametrize("argv", [
    [*SWEEP[:-1], "{tmp}/o\udcff"],  # --out: a real sweep failed with a UnicodeEncodeError traceback mid-run
    ["bench", "conf={tmp}/c.yaml", "--env", "MY_X=\udcff", "--out", "{tmp}/out"],  # the bench ran, then its .md failed
], ids=["out", "env"])
def test_a_command_line_word_that_is_not_utf8_is_refused_first(tmp_path, capsys, argv):
    # bytes a shell passes that are not UTF-8 reach Python as lone surrogates (here \udcff for the byte 0xff)
    line = refused(tmp_path, capsys, argv, {"c.yaml": GOOD})
    assert "\\xff': not UTF-8 text (byte 0xff at character" in line and "allowed: UTF-8 text" in line


def test_submit_print_with_a_script_path_is_two_answers(tmp_path, capsys):
    # --print returned before --script was looked at: the script path was dropped without a word, exit 0
    line = refused(tmp_path, capsys, ["submit", "--print", "--script", "{tmp}/job.sh", "--", "sweep"])
    assert f"--script {tmp_path}/job.sh: not with --print" in line and not (tmp_path / "job.sh").exists()


@pytest.mark.slow  # a CLI start: about 1 s idle, more under load
def test_an_endless_input_file_is_refused_at_a_bound_not_read_until_memory_runs_out(tmp_path):
    # --env-file /dev/zero (a device or a pipe that never ends) was read whole: memory grew until the kernel killed
    # the command. Run under a 2 GiB address-space limit so the unfixed read ends as a MemoryError, not a machine swap.
    import resource
    import subprocess
    import sys

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    proc = subprocess.run([sys.executable, "-m", "envmatrix", "bisect", "--grid", "1x2", "--env-file", "/dev/zero",
                           "--out", str(tmp_path / "out")], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          preexec_fn=limit)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    (line,) = proc.stderr.strip().splitlines()
    assert "--env-file /dev/zero: more than 64 MiB; allowed: a text file of at most 64 MiB" in line
    assert list(tmp_path.iterdir()) == []


def test_an_env_file_from_a_pipe_that_ends_is_read(tmp_path, capsys):
    # the bound is on bytes, not on the kind of file: process substitution (--env-file <(env | grep NCCL)) is a pipe
    read, write = os.pipe()
    os.write(write, b"export NCCL_ALGOO=Ring\n")
    os.close(write)
    try:
        line = refused(tmp_path, capsys, ["bisect", "--grid", "1x2", "--env-file", f"/dev/fd/{read}", "--out", "{tmp}/o"])
    finally:
        os.close(read)
    assert "NCCL_ALGOO: unknown variable NCCL_ALGOO (did you mean NCCL_ALGO?)" in line


@pytest.mark.parametrize("flags,expect", [
    (["--format", "markdown"], "--format markdown: only with --table"),  # the default's own value passed, unused
    (["--table", "conditions", "-o", "{tmp}/t.md"], "-o/--output {tmp}/t.md: not with --table, which prints the table"),
], ids=["format-without-table", "output-with-table"])
def test_a_report_flag_the_chosen_output_does_not_use_is_refused(tmp_path, capsys, flags, expect):
    # each was dropped without a word: an HTML report written for --format markdown, a printed table for -o
    fixture = (Path(__file__).parent / "data" / "report_fixture" / "results.json").read_bytes()  # a recorded sweep
    line = refused(tmp_path, capsys, ["report", "{tmp}/r", *flags], {"r/results.json": fixture})
    assert expect.replace("{tmp}", str(tmp_path)) in line


def test_repeatable_flags_and_overrides_around_flags_still_take_every_value(tmp_path, capsys):
    # --network appends; '~setups.b' after the flags is an override (2df440f)
    conf = GOOD + "  b: {NCCL_PROTO: Simple}\n"
    code, out, err, _, _ = _main(tmp_path, capsys, ["sweep", "conf={tmp}/c.yaml", "--dry-run", "--network", "default",
                                                    "--allow-ignored-vars", "--network", "b1:rate=1gbit", "~setups.b"],
                                 {"c.yaml": conf})
    assert code == 0, err
    assert "b1" in out and "(b)" not in out


@pytest.mark.parametrize("argv,text,expect", [
    (["sweep", "conf={tmp}/c.yaml", "--dry-run", "--out", "{tmp}/out"],
     "backend: gloo\ngrids: [1x2]\nstrategies: [{kind: product, vars: {'A=B': [x, y]}}]\n",
     "c.yaml: strategies[0].vars.A=B: 'A=B' contains '='"),
    (["search", "conf={tmp}/c.yaml", "--dry-run", "--out", "{tmp}/out"],
     "backend: gloo\ngrids: [1x2]\nsearch:\n  space: {\"C\\nD\": [x, y]}\n",
     "c.yaml: search.space.C\\nD: 'C\\nD' is not a variable name"),
], ids=["product-equals", "search-newline"])
def test_a_varied_variable_name_a_shell_cannot_export_is_refused(tmp_path, capsys, argv, text, expect):
    # setups' and search.fixed's names were checked, a product's or search space's were not: with
    # --allow-unknown-vars 'A=B' ran as 'export A=B=x' (A set to 'B=x'), 'C\nD' as two rows of the space
    line = refused(tmp_path, capsys, [*argv, "--allow-unknown-vars", "--allow-ignored-vars"], {"c.yaml": text})
    assert expect in line


def test_a_conf_that_is_a_fifo_is_named_as_one_not_as_missing(tmp_path, capsys):
    # 'no such config file' for a path that is there (a FIFO, /dev/null) sent the user looking for a typo
    os.mkfifo(tmp_path / "c.yaml")
    line = refused(tmp_path, capsys, ["sweep", "conf={tmp}/c.yaml", "--dry-run", "--out", "{tmp}/out"])
    assert "c.yaml: is not a regular file (a FIFO, socket or device)" in line
