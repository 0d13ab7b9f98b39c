"""Bisect a failing environment down to its culprit atoms."""
