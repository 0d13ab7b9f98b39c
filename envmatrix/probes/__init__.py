"""Probes (driver side): what ranks run and how their reports are judged; the code that runs inside ranks is
envmatrix.rank. Importing this package registers the built-in probes."""

from envmatrix.probes.base import Probe, get_probe, probe_names, register
from envmatrix.probes import builtin as _builtin  # noqa: F401
from envmatrix.probes import command as _command  # noqa: F401
from envmatrix.probes import mpi as _mpi  # noqa: F401
from envmatrix.probes import netpair as _netpair  # noqa: F401

__all__ = ["Probe", "get_probe", "probe_names", "register"]
