"""Validation suites that ship with the package: the analytic-vs-Monte-Carlo agreement suite.

``validation/`` in the repository holds thin scripts and benchmarks that call into this package.
"""
