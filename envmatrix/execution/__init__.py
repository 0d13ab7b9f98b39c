"""The only package that starts processes (always shell=False)."""
