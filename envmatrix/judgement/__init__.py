"""Domain judgements over stored results: speed thresholds, expectations, outliers, physics checks.

Each module here is pure: it takes results (or their figures) and returns verdicts as data. Reporting renders
those verdicts; it never makes them (ARCHITECTURE.md).
"""
