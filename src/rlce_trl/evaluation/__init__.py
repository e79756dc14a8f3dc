"""The paper's evaluation protocol (appendix A): metrics, LLM judges, the `evaluate` entry point and best-on-validation
checkpoint selection. Submodules are imported on use, so that `metrics` stays free of torch."""
