"""The one training pipeline, as a library, that every run goes through (the scripts of `rlce_trl.scripts`, `rlce-trl
train` and `check`, test-time adaptation, each co-evolution phase): `pipeline` (`train`, `TaskRows`, the policy's
prompts), `arguments` (the command line), `recipes`, `tta`, `preflight` (`rlce-trl check`) and `disk`.
"""
