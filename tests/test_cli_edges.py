"""The command line at its edges (issue 39 point 6): a Ctrl-C at any moment is a clean exit 130, output piped into
`head` ends without a traceback, and a mistyped flag gets one line, not argparse's whole usage."""

import os
import signal
import subprocess
import sys
import time

import pytest


@pytest.mark.slow
def test_ctrl_c_in_the_first_moments_exits_130_without_a_traceback(cli):
    # From the moment the interpreter runs envmatrix (before: Python's own start-up, out of its reach) through
    # building the parser (every command module imported) and on.
    t0 = time.monotonic()
    subprocess.run([sys.executable, "-c", "pass"], env=cli.env, check=True)
    start = 1.5 * (time.monotonic() - t0)
    reached = 0
    for delay in (start + step * 0.03 for step in range(10)):
        proc = subprocess.Popen(cli.argv("configs"), cwd=cli.cwd, env=cli.env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        if "Fatal Python error: init_import_site" in err:
            continue  # a slow start: the signal landed in site's .pth imports, before envmatrix runs (CI run 45)
        frames = [line for line in err.splitlines() if line.strip().startswith('File "')]
        if frames and not any("/envmatrix/" in frame for frame in frames):
            continue  # runpy still importing the package (compiling a fresh clone's __init__.py): before its first line (CI run 97)
        reached += 1
        # never -2 (killed by SIGINT after the message): interrupts.clear() resets CPython's stale note (802971a)
        assert "Traceback" not in err and proc.returncode in (0, 130), (delay, proc.returncode, err)
    assert reached >= 5, f"only {reached} of 10 interrupts landed after Python's own start-up: nothing was tested"


def test_output_into_a_closed_pipe_ends_quietly(cli):
    read, write = os.pipe()
    os.close(read)  # the reader (head -1) is gone before the first line
    proc = subprocess.Popen(cli.argv("configs", "--json"), cwd=cli.cwd, env=cli.env, stdout=write,
                            stderr=subprocess.PIPE, text=True)
    os.close(write)
    _, err = proc.communicate(timeout=60)
    assert err == "" and proc.returncode == 141  # 128 + SIGPIPE, as a shell reports a writer killed by it


def test_rich_tables_into_a_closed_pipe_end_quietly_with_141_too(cli, tmp_path):
    # rich's console answers a broken pipe with SystemExit(1) of its own; `envmatrix sweep ... | head` must still
    # say 141, as every writer does (README's exit codes)
    from conftest import write_conf

    conf = write_conf(tmp_path / "c.yaml", "backend: gloo\ngrids: [1x2]\nsetups:\n  a: {TORCH_DISTRIBUTED_DEBUG: INFO}\n")
    read, write = os.pipe()
    os.close(read)
    proc = subprocess.Popen(cli.argv("sweep", f"conf={conf}", "--dry-run"), cwd=cli.cwd, env=cli.env, stdout=write,
                            stderr=subprocess.PIPE, text=True)
    os.close(write)
    _, err = proc.communicate(timeout=60)
    assert "Traceback" not in err and proc.returncode == 141, (proc.returncode, err)


@pytest.mark.parametrize("args,flag", [(("sweep", "--dry-runn"), "--dry-runn"), (("bench", "-n", "x"), "'x'"),
                                       (("swep",), "'swep'")])
def test_a_one_word_mistake_gets_one_line_and_points_at_help(cli, args, flag):
    done = cli.run(*args)
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("envmatrix") and flag in line and line.endswith("--help")


@pytest.mark.parametrize("args,command", [(("sweep", "--dry-runn"), "sweep"), (("report", "r", "--tabel"), "report")])
def test_a_mistyped_flag_points_at_its_own_commands_help(cli, args, command):
    # docs/configuration.md: "a mistyped flag gets one line and `see envmatrix CMD --help`"
    done = cli.run(*args)
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.endswith(f"see envmatrix {command} --help"), line


@pytest.mark.parametrize("columns", ["abc", "0"])
def test_a_columns_value_that_is_no_width_is_ignored_not_a_traceback(cli, tmp_path, columns):
    # COLUMNS comes from the shell (or a CI runner), not from the user's command: the console falls back to its width
    from conftest import write_conf

    conf = write_conf(tmp_path / "c.yaml", "backend: gloo\ngrids: [1x2]\nsetups:\n  a: {TORCH_DISTRIBUTED_DEBUG: INFO}\n")
    cli.env["COLUMNS"] = columns
    done = cli.run("sweep", f"conf={conf}", "--dry-run", "--out", str(tmp_path / "o"))
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert "1 setups x 1 grids = 1 runs" in done.stdout and not (tmp_path / "o").exists()


def test_a_stray_word_with_a_line_break_is_still_one_line(capsys):
    # argparse joins what it did not recognise as typed: a pasted "a<newline>b" split its error over two lines
    from envmatrix.cli import main

    with pytest.raises(SystemExit) as done:
        main(["configs", "a\nb"])
    assert done.value.code == 2
    assert capsys.readouterr().err == "envmatrix configs: error: unrecognized arguments: a\\nb; see envmatrix configs --help\n"
