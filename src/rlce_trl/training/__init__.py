"""The one training pipeline, as a library: every run goes through it (the training scripts of `rlce_trl.scripts`,
`rlce-trl train` and `check`, test-time adaptation, each co-evolution phase).

- `pipeline`: [`train`](rlce_trl.training.pipeline.train), what a task hands it (`TaskRows`), the prompts as the
  policy sees them (`policy_rows`), the length filter, the trainer, the saved model, card and report;
- `arguments`: the training command line (the recipe parser with one-line errors, the shared script arguments);
- `recipes`: the shipped YAML recipes (`rlce-trl recipes`) and the training script a recipe names (`rlce-trl train`);
- `tta`: test-time adaptation, a run of the pipeline on a split with its gold withheld (`tta_split`);
- `preflight`: `rlce-trl check`, one sampled step of the real trainer without training;
- `disk`: the disk use of a run (checkpoint size, one copy of the final weights).
"""
