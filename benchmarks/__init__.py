"""Benchmarks: run from the repository root as modules, `python -m benchmarks.<name> [--flags]`, so that they import
each other (`benchmarks.verifier_throughput`) and the tests' tiny-model builders (`tests.testing_utils`) with no
`sys.path` edits."""
