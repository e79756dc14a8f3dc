"""The training scripts, installed with the package (as TRL keeps `trl/scripts/`).

- `train_prefeval`: RLCE on PrefEval or the bundled preference sample (`python -m rlce_trl.scripts.train_prefeval`);
- `train_hba`: RLCE on the Human Behavior Atlas video tasks (`python -m rlce_trl.scripts.train_hba`);
- `train_elect`: the Elect rewards on the numbered-evidence task (`python -m rlce_trl.scripts.train_elect`);
- `arguments`: their command line (the recipe parser with one-line errors, the shared script arguments, `run_script`);
- `utils`: the one training pipeline they run (`train`: model aliases, prompt filters, validation, the script tail);
- `tta`: test-time adaptation, a run of that pipeline on a split with its gold withheld (`tta_split`);
- `recipes`: the shipped YAML recipes (`rlce-trl recipes`) and the script a recipe belongs to (`rlce-trl train`).

`examples/train_prefeval.py`, `examples/train_hba.py` and `examples/train_elect.py` in a clone are thin wrappers
around these modules.
"""
