"""Reward-hacking probe for Elect's frame-sensitive reward (Elect paper Eq. 7-8; next-capabilities §1.7 A2).

s_fs = clip((|K| - E) / (1 + |K|), 0, 1) grows with every valid citation, so citing all T frames is its optimum,
whatever the evidence is. Part 1 prints that algebra against the evidence-grounding score EGS = 1/2 (valid fraction
+ Jaccard with the gold evidence). Part 2 trains: a tiny model, first taught the Elect schema with citation counts
spread over 1..T (a short supervised warm start, so the schema exists before RL), then GRPO on the five Elect rewards
(gold gate) with a stock `trl.GRPOTrainer`, logging per step the mean cited fraction |K|/T and EGS. A rising |K|/T
with falling EGS is the documented failure mode.

    python -m benchmarks.elect_rewards --steps 20          # algebra + 20 GRPO steps of a tiny model (minutes)
    python -m benchmarks.elect_rewards --steps 0           # algebra only
"""

from __future__ import annotations

import argparse
import random
import tempfile
from pathlib import Path

from rlce_trl.data.synthetic import evidence_grounding_score
from rlce_trl.elect import ElectRewardConfig, frame_sensitive_score, make_elect_reward_funcs, parse_elect_output

T, GOLD, EVIDENCE = 8, "garden", [2, 5]
WORDS = ["<think>", "</think>", "<keyframes>", "</keyframes>", "<answer>", "</answer>", "garden", "garage", "sentence",
         "and", "say", "so", "where", "is", "it", "?"] + [str(i) for i in range(1, T + 1)]


def algebra() -> None:
    print("| cited frames | K/T | s_fs (reward) | EGS (gold = {2, 5}) |\n|---|---|---|---|")
    for k in range(1, T + 1):
        cited = set(EVIDENCE[:k]) | {f for f in range(1, T + 1) if f not in EVIDENCE}
        cited = set(sorted(cited, key=lambda f: (f not in EVIDENCE, f))[:k])
        print(f"| {sorted(cited)} | {k / T:.3f} | {frame_sensitive_score(k, 0):.3f} | "
              f"{evidence_grounding_score(cited, 0, EVIDENCE):.3f} |")


def build_model(path: Path):
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    specials = ["<pad>", "[UNK]", "<|im_start|>", "<|im_end|>", "user", "assistant"]
    vocab = {w: i for i, w in enumerate(specials + WORDS)}
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]", pad_token="<pad>",
                                  eos_token="<|im_end|>", additional_special_tokens=["<|im_start|>"])
    tok.chat_template = ("{% for m in messages %}<|im_start|> {{ m['role'] }} {{ m['content'] }} <|im_end|> "
                         "{% endfor %}{% if add_generation_prompt %}<|im_start|> assistant {% endif %}")
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=256,
                         pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id, bos_token_id=None)
    model = LlamaForCausalLM(config)
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    return model, tok


def warm_start(model, tok, steps: int, rng: random.Random) -> None:
    """Supervised warm start on schema-following replies whose citation count is uniform over 1..T."""
    import torch

    prompt = tok.apply_chat_template([{"role": "user", "content": "where is it ?"}], tokenize=False,
                                     add_generation_prompt=True)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(steps):
        texts = []
        for _ in range(16):
            cited = sorted(rng.sample(range(1, T + 1), rng.randint(1, T)))
            answer = GOLD if rng.random() < 0.5 else "garage"
            texts.append(f"{prompt}<think> sentence {cited[0]} say so </think> <keyframes> "
                         f"{' '.join(map(str, cited))} </keyframes> <answer> {answer} </answer> <|im_end|>")
        batch = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False)
        labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
        loss = model(**batch, labels=labels).loss
        loss.backward()
        opt.step()
        opt.zero_grad()


def probe(steps: int, warm_steps: int, seed: int, lr: float = 1e-3) -> None:
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from rlce_trl.data.prompts import completion_text

    rng = random.Random(seed)
    history: list[dict] = []

    def elect_probe(prompts, completions, log_metric=None, **kwargs):  # weight 0: a logger, not a reward
        parses = [parse_elect_output(completion_text(c), T) for c in completions]
        cited = [len(p.keyframes) / T for p in parses]
        egs = [evidence_grounding_score(p.keyframes, p.invalid, EVIDENCE) for p in parses]
        history.append({"cited": sum(cited) / len(cited), "egs": sum(egs) / len(egs),
                        "format": sum(p.format_ok for p in parses) / len(parses),
                        "acc": sum(p.answer == GOLD for p in parses) / len(parses)})
        h = history[-1]
        print(f"probe step {len(history)}: cited K/T {h['cited']:.3f}, EGS {h['egs']:.3f}, format {h['format']:.2f}, "
              f"accuracy {h['acc']:.2f}", flush=True)
        return [0.0] * len(completions)

    with tempfile.TemporaryDirectory() as tmp:
        model, tok = build_model(Path(tmp))
        warm_start(model, tok, warm_steps, rng)
        model.save_pretrained(Path(tmp) / "m")
        tok.save_pretrained(Path(tmp) / "m")
        funcs, weights = make_elect_reward_funcs(ElectRewardConfig(tokenizer=tok, think_range=(2, 12),
                                                                   labels_column="options"))
        rows = [{"prompt": [{"role": "user", "content": "where is it ?"}], "solution": GOLD, "num_frames": T,
                 "options": [GOLD, "garage"]} for _ in range(64)]
        args = GRPOConfig(output_dir=str(Path(tmp) / "out"), per_device_train_batch_size=16, num_generations=8,
                          max_completion_length=40, max_steps=steps, learning_rate=lr, logging_steps=1,
                          report_to="none", bf16=False, use_cpu=True, gradient_checkpointing=False,
                          save_strategy="no", seed=seed, reward_weights=[*weights, 0.0], temperature=1.0)
        trainer = GRPOTrainer(model=str(Path(tmp) / "m"), reward_funcs=[*funcs, elect_probe], args=args,
                              processing_class=tok, train_dataset=Dataset.from_list(rows))
        trainer.train()
    print("\nGRPO on the five Elect rewards (gold gate, think range (2, 12) words-as-tokens), tiny model warm-started "
          f"{warm_steps} steps, G=8, 16 completions/step, lr {lr}, up to 40 tokens, seed {seed}\n")
    print("| step | cited K/T | EGS | format | accuracy |\n|---|---|---|---|---|")
    for i, h in enumerate(history):
        if i % max(1, len(history) // 10) == 0 or i == len(history) - 1:
            print(f"| {i + 1} | {h['cited']:.3f} | {h['egs']:.3f} | {h['format']:.2f} | {h['acc']:.2f} |")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warm-steps", type=int, default=150)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    algebra()
    if args.steps:
        probe(args.steps, args.warm_steps, args.seed, args.lr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
