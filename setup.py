"""Build step: the repo's conf/, search_spaces/ and launchers/ templates go into the wheel as envmatrix/_bundled/,
and the bench's compiled launch window (envmatrix/rank/_launch_window.c) is built where a C compiler is.

The top-level folders stay the visible source; envmatrix.paths finds the bundled copies through
importlib.resources when the package is installed from a wheel (no checkout next to it).
The launch window is optional (issue 16): without a compiler the install goes on, and `envmatrix bench`'s
host timing runs its launches from a Python loop instead, recording `loop: python` in every row.
"""

import os
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_py import build_py

BUNDLED = {"conf": "*.yaml", "search_spaces": "*.yaml", "launchers": "*.tmpl"}


class BuildWithBundledData(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return  # an editable install reads the checkout's folders directly
        root = Path(__file__).resolve().parent
        for folder, pattern in BUNDLED.items():
            files = sorted((root / folder).glob(pattern))
            if not files:
                raise SystemExit(f"setup.py: no {folder}/{pattern} to bundle; build from a full checkout or sdist")
            for src in files:
                dest = os.path.join(self.build_lib, "envmatrix", "_bundled", folder, src.name)
                self.mkpath(os.path.dirname(dest))
                self.copy_file(str(src), dest)


# A plain shared library loaded with ctypes (no Python header, never imported): its functions call libnccl and
# libcudart through the addresses a rank passes in, so it links against neither.
LAUNCH_WINDOW = Extension("envmatrix.rank._launch_window", ["envmatrix/rank/_launch_window.c"],
                          extra_compile_args=["-O2"], optional=True)

setup(cmdclass={"build_py": BuildWithBundledData}, ext_modules=[LAUNCH_WINDOW])
