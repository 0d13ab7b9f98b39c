"""The application layer: what a command orchestrates (a sweep, a bench) over the domain and infrastructure below.

The command line (envmatrix.cli) is the only caller; nothing here parses flags or prints.
"""
