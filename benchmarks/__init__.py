"""Rimthan benchmarks: each figure measured beside its floor in the same run.

Run with ``make bench`` (or ``make bench-quick``); see ``python -m benchmarks --help``.
Nothing here is imported by the product or by the test suite.
"""
