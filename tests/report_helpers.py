"""Headless Chromium for the report tests: load a page, collect console output, read the page's self-check, screenshot."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

CONSOLE = re.compile(r":CONSOLE[:(]")


def chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.skip("chromium not installed (apt-get install chromium; .ci/run does it)")
    return path


def _argv(extra: list[str], url: str) -> list[str]:
    # --no-sandbox: CI runs as root; --virtual-time-budget lets the load handler run before the DOM is dumped.
    return [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
            "--enable-logging=stderr", "--v=0", "--virtual-time-budget=5000", *extra, url]


@dataclass
class Loaded:
    dom: str
    console: list[str]
    figures: int
    drawn: int


def load_page(page: Path, timeout: float = 120) -> Loaded:
    done = subprocess.run(_argv(["--dump-dom"], page.resolve().as_uri()), capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-2000:]
    console = [line for line in done.stderr.splitlines() if CONSOLE.search(line)]
    figures = re.search(r'data-figures="(\d+)"', done.stdout)
    drawn = re.search(r'data-drawn="(\d+)"', done.stdout)
    return Loaded(done.stdout, console, int(figures.group(1)) if figures else -1, int(drawn.group(1)) if drawn else -1)


def screenshot(page: Path, png: Path, width: int = 1280, height: int = 2400, timeout: float = 120) -> Path:
    done = subprocess.run(_argv([f"--window-size={width},{height}", f"--screenshot={png}"], page.resolve().as_uri()),
                          capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0 and png.is_file(), done.stderr[-2000:]
    return png
