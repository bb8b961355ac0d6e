"""Benchmarks: request accounting, modelled AWS cost, supervisor scaling, detection lag,
throughput and cold start (`make bench`, docs/benchmarks.md)."""
