"""The one-step report of tools/gpu_check_colocate.py (the script itself needs a CUDA GPU)."""

import importlib.util
from pathlib import Path


def test_step_report_names_step_time_verifier_share_and_memory_per_part():
    path = Path(__file__).resolve().parents[1] / "tools" / "gpu_check_colocate.py"
    spec = importlib.util.spec_from_file_location("gpu_check_colocate", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    line = module.step_report({
        "trl_sleep_mode": "on", "seconds": {"train_step": 8.0}, "verifier_seconds": 2.0, "verifier_gib": 3.1,
        "policy_engine_gib": 5.0, "training_torch_peak_gib": 2.25, "gpu_used_peak_gib": 12.0,
    })
    assert "step 8.0 s" in line and "verifier 2.0 s (25% of the step)" in line
    assert "verifier 3.10 GiB" in line and "policy engine 5.00 GiB" in line and "training 2.25 GiB" in line
