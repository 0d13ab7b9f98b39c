"""Network conditions: parse and validate them (``conditions``, pure), apply and undo them on links
(``shaping``: one context manager), and remember what was installed so a killed run's qdiscs are removed by the
next command (``state``). The only room that talks netlink (``netlink``, ``links``: pyroute2) and so the only
one that touches qdiscs; ``envmatrix.cluster`` builds its emulated hosts through ``links``.
"""
