"""The application layer: each command's lifecycle (``app/<command>.py``) over the domain and infrastructure below.

A lifecycle takes the command's request (a frozen dataclass: what the command line asked), resolves the config
once, builds the launcher once, opens the store once and passes it down, and returns a result (its exit code
included). What the console shows while it runs arrives through callbacks the command line passes in; nothing
here parses flags or prints. The command line (envmatrix.cli) is the only caller.
"""
