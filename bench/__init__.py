"""Benchmarks: development-only commands (`manage.py bench_*`) that fill scratch
databases with synthetic memories and print timings (docs/benchmarks.md).

The service does not need this package; settings install it as an app only
when it is present.
"""
