"""How the shipped tiny model in this folder was built: supervised pretraining of a small
character-level Llama on the synthetic task families of es_grpo.py (Countdown, digit addition, digit
sorting), never on an evaluation problem. Not part of the paper (es_grpo.py, departure 1); kept
beside the model it builds.

    python tiny_model/pretrain.py                  # rebuild tiny_model/ (record: pretrain.json)
    python tiny_model/pretrain.py --out /tmp/m --steps 100
"""
from __future__ import annotations

import dataclasses
import json
import math
import random
import sys
from dataclasses import dataclass
from pathlib import Path

import torch
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from es_grpo import (TINY_MODEL, Rollout, dataclass_parser, flag, log, masked_mean, prompt_text,
                     token_logprobs)  # noqa: E402
from tiny_model.tasks import make_problem, never_trained_on, problem_key  # noqa: E402

CHARS = "0123456789+-*/(),=: ACS"


@dataclass
class PretrainArgs:
    """Supervised pretraining of the shipped tiny model on the synthetic task families."""

    out: str = flag(str(TINY_MODEL), "folder to write the model and tokenizer to")
    seed: int = flag(0, "seed")
    steps: int = flag(800, "optimizer steps")
    batch: int = flag(256, "sequences per step")
    lr: float = flag(3e-3, "peak AdamW learning rate (cosine decay)")
    countdown_share: float = flag(0.6, "share of Countdown examples (the rest: add and sort)")
    # size (the shipped model: the defaults; other sizes for the population sweeps and drift of
    # claims 4 and 6)
    hidden_size: int = flag(128, "model width")
    intermediate_size: int = flag(384, "MLP width")
    layers: int = flag(4, "transformer layers")
    heads: int = flag(4, "attention heads (they must divide --hidden-size)")
    tie_embeddings: bool = flag(True,
                                "one matrix for the input embedding and the LM head "
                                "(--no-tie-embeddings: "
                                      "two, so that drift per module kind tells them apart)")


def build_tiny_model(seed: int, hidden_size: int = 128, intermediate_size: int = 384,
                     layers: int = 4, heads: int = 4, tie_embeddings: bool = True):
    """A character-level tokenizer and a small Llama, both plain transformers."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "<eos>": 1, "<unk>": 2, **{c: i + 3 for i, c in enumerate(CHARS)}}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    # one token per character
    backend.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    backend.decoder = decoders.Fuse()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="<pad>",
                                        eos_token="<eos>", unk_token="<unk>", padding_side="left")
    config = LlamaConfig(vocab_size=len(vocab), hidden_size=hidden_size,
                         intermediate_size=intermediate_size,
                         num_hidden_layers=layers, num_attention_heads=heads,
                         num_key_value_heads=heads,
                         max_position_embeddings=64, tie_word_embeddings=tie_embeddings,
                         pad_token_id=0, bos_token_id=1, eos_token_id=1)
    torch.manual_seed(seed)
    return LlamaForCausalLM(config), tokenizer


def pretrain(p: PretrainArgs, command: str = "python tiny_model/pretrain.py"):
    torch.manual_seed(p.seed)
    model, tokenizer = build_tiny_model(p.seed, p.hidden_size, p.intermediate_size, p.layers,
                                        p.heads, p.tie_embeddings)
    rng = random.Random(p.seed)
    excluded = never_trained_on()
    optimizer = torch.optim.AdamW(model.parameters(), lr=p.lr, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer,
                                                 lambda s: 0.5
                                                 * (1 + math.cos(math.pi * s / p.steps)))
    bar = tqdm(range(p.steps), desc="pretrain")
    for _ in bar:
        problems = []
        while len(problems) < p.batch:
            task = "countdown" if rng.random() < p.countdown_share else rng.choice(["add", "sort"])
            problem = make_problem(task, rng)
            if problem_key(problem) not in excluded:  # never train on the evaluation problems
                problems.append(problem)
        prompts = tokenizer([prompt_text(x, tokenizer) for x in problems], padding=True,
                            return_tensors="pt")
        tokenizer.padding_side = "right"
        targets = [x.get("solution", x.get("answer")) + tokenizer.eos_token for x in problems]
        completions = tokenizer(targets, padding=True, return_tensors="pt")
        tokenizer.padding_side = "left"
        roll = Rollout([], prompts["input_ids"], prompts["attention_mask"],
                       completions["input_ids"], completions["attention_mask"], None, None)
        logp, _ = token_logprobs(model, roll)  # (B, T)
        # () next-token cross-entropy on the answers
        loss = -masked_mean(logp, roll.completion_mask)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        schedule.step()
        bar.set_postfix(loss=f"{loss.item():.3f}")
    model.save_pretrained(p.out)
    tokenizer.save_pretrained(p.out)
    record = {"command": command, **dataclasses.asdict(p), "final_loss": round(loss.item(), 4),
              "torch": torch.__version__}
    record["out"] = Path(p.out).name
    Path(p.out, "pretrain.json").write_text(json.dumps(record, indent=2))
    log(f"saved {p.out}: loss {loss.item():.3f}")


def main(argv: list[str]):
    parser = dataclass_parser(PretrainArgs, "tiny_model/pretrain.py")
    p = PretrainArgs(**vars(parser.parse_args(argv)))
    if min(p.steps, p.batch, p.hidden_size, p.intermediate_size, p.layers,
           p.heads) < 1 or p.hidden_size % p.heads:
        parser.error("steps, batch and sizes must be at least 1, and --heads must divide "
                     "--hidden-size")
    pretrain(p, " ".join(["python tiny_model/pretrain.py", *argv]))


if __name__ == "__main__":
    main(sys.argv[1:])
