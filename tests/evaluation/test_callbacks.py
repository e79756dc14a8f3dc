import json

import pytest
from testing_utils import build_corpus_model


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return build_corpus_model(tmp_path_factory.mktemp("tiny"), ["hello world it is a test of the best checkpoint"])


def _train(tiny, tmp_path, callback, max_steps):
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, Trainer, TrainingArguments

    tokenizer = AutoTokenizer.from_pretrained(tiny)
    model = AutoModelForCausalLM.from_pretrained(tiny)
    ids = tokenizer("hello world it is a test", add_special_tokens=False)["input_ids"]
    data = Dataset.from_list([{"input_ids": ids, "labels": ids}] * 16)
    args = TrainingArguments(
        output_dir=str(tmp_path / "run"),
        max_steps=max_steps,
        per_device_train_batch_size=2,
        learning_rate=1e-3,
        use_cpu=True,
        bf16=False,
        report_to=[],
        save_strategy="no",
        logging_steps=1,
        disable_tqdm=True,
    )
    trainer = Trainer(model=model, args=args, train_dataset=data, processing_class=tokenizer, callbacks=[callback])
    trainer.train()
    return trainer


def test_keeps_best_and_stops_early(tiny, tmp_path):
    from rlce_trl.evaluation.callbacks import BestCheckpointCallback

    scores = iter([0.1, 0.5, 0.3, 0.9])
    seen = []

    def validate(model, processing_class, step):
        seen.append(step)
        return next(scores)

    callback = BestCheckpointCallback(validate, eval_steps=2, patience=1)
    trainer = _train(tiny, tmp_path, callback, max_steps=10)
    assert seen == [2, 4, 6] and trainer.state.global_step == 6  # stopped after one validation without progress
    assert (callback.best_step, callback.best_score) == (4, 0.5)
    best = tmp_path / "run" / "best"
    assert (best / "config.json").exists() and (best / "tokenizer_config.json").exists()
    record = json.loads((tmp_path / "run" / "best.json").read_text())
    assert record["best_step"] == 4 and record["stopped_early"] and len(record["history"]) == 3
    assert any(h.get("validation_score") == 0.5 for h in trainer.state.log_history)


def test_validates_at_end_and_with_rows(tiny, tmp_path):
    from rlce_trl.data.hba import URFUNNY_LABELS
    from rlce_trl.evaluation.callbacks import BestCheckpointCallback, make_validation_fn

    rows = [
        {
            "id": f"r{i}",
            "task": "urfunny",
            "answer_options": list(URFUNNY_LABELS),
            "gold": "humour",
            "prompt": [{"role": "user", "content": "hello world"}],
        }
        for i in range(2)
    ]
    validate = make_validation_fn(rows, tmp_path / "validation", max_new_tokens=3)
    callback = BestCheckpointCallback(validate, eval_steps=2, greater_is_better=True)
    _train(tiny, tmp_path, callback, max_steps=3)
    assert [h["step"] for h in callback.history] == [2, 3]
    assert (tmp_path / "validation" / "step-2" / "summary.json").exists()
    assert (tmp_path / "validation" / "step-3" / "predictions.jsonl").exists()
