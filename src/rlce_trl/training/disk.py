"""Disk use of a training run: the first checkpoint's size is printed when it is written, and the final model does
not add a second full copy of weights that a checkpoint already holds (identical weight files are hard-linked)."""

from __future__ import annotations

import filecmp
import os

from transformers import TrainerCallback

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")


def folder_bytes(path: str) -> int:
    """Bytes of the files under `path`, each counted once (hard links too)."""
    seen, total = set(), 0
    for root, _, files in os.walk(path):
        for name in files:
            stat = os.stat(os.path.join(root, name))
            if (stat.st_dev, stat.st_ino) not in seen:
                seen.add((stat.st_dev, stat.st_ino))
                total += stat.st_size
    return total


def human(size: int) -> str:
    for unit in ("B", "KB", "MB"):
        if size < 1000:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{size:.1f} GB"


class CheckpointSizeCallback(TrainerCallback):
    """Prints the size of the run's first checkpoint when it is written (main process)."""

    printed = False

    def on_save(self, args, state, control, **kwargs):
        folder = os.path.join(args.output_dir, f"checkpoint-{state.global_step}")
        if not self.printed and state.is_world_process_zero and os.path.isdir(folder):
            self.printed = True
            from accelerate import PartialState  # the run's output line, as the trainer's accelerator prints

            PartialState().print(f"Checkpoint {folder}: {human(folder_bytes(folder))} on disk (every checkpoint takes "
                                 "about as much; save_only_model drops the optimizer state, save_total_limit keeps "
                                 "fewer).", flush=True)
        return control


def link_final_weights(output_dir: str) -> int:
    """Replace weight files of the checkpoints in `output_dir` that are byte-identical to the final model's (same name
    in `output_dir`) with hard links to them: the final model and its last checkpoint then share one copy. Returns the
    bytes freed; 0 where the file system has no hard links."""
    freed = 0
    finals = {n: os.path.join(output_dir, n) for n in os.listdir(output_dir) if n.endswith(WEIGHT_SUFFIXES)}
    for entry in os.listdir(output_dir):
        folder = os.path.join(output_dir, entry)
        if not (entry.startswith("checkpoint-") and os.path.isdir(folder)):
            continue
        for name, final in finals.items():
            copy = os.path.join(folder, name)
            if not os.path.isfile(copy) or os.path.samefile(copy, final):
                continue
            if os.path.getsize(copy) != os.path.getsize(final) or not filecmp.cmp(copy, final, shallow=False):
                continue
            tmp = copy + ".link"
            try:
                os.link(final, tmp)
                os.replace(tmp, copy)
            except OSError:
                if os.path.exists(tmp):
                    os.remove(tmp)
                continue
            freed += os.path.getsize(final)
    return freed
