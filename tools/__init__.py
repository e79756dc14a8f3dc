"""Maintenance and GPU-check scripts: run from the repository root as modules, `python -m tools.<name> [--flags]`, so
that they import the tests' tiny-model builders (`tests.testing_utils`) and the benchmarks with no `sys.path` edits."""
