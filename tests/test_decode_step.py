"""scale/decode_step.py: a new token's step through a few operations a layer gives what the model's
own forward gives (the same tokens, log-probs and entropy as the HF path with the forward), for
Llama (the tiny model, float32 and bfloat16 with its joined products) and Qwen2 (biases); other
models keep the forward. The real model's tier compares them on SmolLM2-135M."""
import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel, Qwen2Config, Qwen2ForCausalLM

import es_grpo
from es_grpo import Sampling
from scale import decode_step
from scale.decode import FastRollout, cpu_has_bfloat16


def both_ways(stepped_rows, model, tokenizer, sampling, dtype="model"):
    """FastRollout(dtype) with the step, and with the model's forward for every token; the steps
    the first took and the joined products it made."""
    problems = es_grpo.generate_problems("countdown", 24, seed=2)
    prompts = [es_grpo.prompt_text(p, tokenizer) for p in problems]
    fast = FastRollout(dtype)
    stepped = fast(model, tokenizer, prompts, sampling)
    steps = len(stepped_rows)
    forward = FastRollout(dtype, stepped=False)(model, tokenizer, prompts, sampling)
    joined = [key for key in fast.packs.packed if isinstance(key, tuple)]
    return stepped, forward, steps, len(joined)


def assert_same(stepped, forward, atol: float):
    assert stepped.texts == forward.texts
    assert torch.equal(stepped.completion_mask, forward.completion_mask)
    for name in ("logprobs", "entropy"):
        torch.testing.assert_close(getattr(stepped, name), getattr(forward, name), atol=atol,
                                   rtol=0)


@pytest.mark.parametrize("dtype, temperature", [
    ("model", 0.0), ("model", 1.0), ("bfloat16", 0.0), ("bfloat16", 1.0)])
def test_the_step_decodes_the_tiny_llama_as_its_forward(tiny, stepped_rows, dtype, temperature):
    """Bit for bit: float32, and the bfloat16 copy whose projections are packed and joined where
    this CPU packs bfloat16 (without packs, bfloat16 products are left to within its rounding)."""
    model, tokenizer = tiny
    atol = 1e-2 if dtype == "bfloat16" and not cpu_has_bfloat16() else 0.0
    sampling = Sampling(temperature=temperature, max_new_tokens=10, seed=3, batch_size=4096)
    stepped, forward, steps, joined = both_ways(stepped_rows, model, tokenizer, sampling, dtype)
    assert steps == stepped.completion_ids.shape[1] - 1
    packs = dtype == "bfloat16" and cpu_has_bfloat16()  # query-key-value, gate-up: each layer's
    assert joined == (2 * len(model.model.layers) if packs else 0)
    assert_same(stepped, forward, atol)


def test_the_step_decodes_a_qwen2_with_biases_as_its_forward(tiny, stepped_rows):
    """A randomly made Qwen2 (biases on the query, key and value projections), float32: bit for
    bit."""
    _, tokenizer = tiny
    model = random_qwen2(len(tokenizer), tokenizer.pad_token_id, tokenizer.eos_token_id)
    assert model.model.layers[0].self_attn.q_proj.bias is not None and decode_step.fits(model)
    sampling = Sampling(temperature=1.0, max_new_tokens=8, seed=1, batch_size=4096)
    stepped, forward, steps, _ = both_ways(stepped_rows, model, tokenizer, sampling)
    assert steps == stepped.completion_ids.shape[1] - 1
    assert_same(stepped, forward, 0.0)


def random_qwen2(vocab: int, pad_id: int, end_id: int):
    """A small Qwen2, weights drawn from seed 0: biases on its query, key and value projections."""
    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=vocab, hidden_size=64, intermediate_size=96,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=128, tie_word_embeddings=False,
                         pad_token_id=pad_id, eos_token_id=end_id)
    return Qwen2ForCausalLM(config).eval()


@pytest.mark.skipif(not cpu_has_bfloat16(), reason="joined products are made where this CPU packs "
                                                   "bfloat16")
def test_joined_products_follow_changed_weights_and_biases(tiny):
    """A bfloat16 Qwen2 decoded by one FastRollout, as ES members are: after only a bias changes in
    place, then every weight, the step's joined products are made again and it decodes as the
    forward does, bit for bit."""
    _, tokenizer = tiny
    model = random_qwen2(len(tokenizer), tokenizer.pad_token_id,
                         tokenizer.eos_token_id).to(torch.bfloat16)
    problems = es_grpo.generate_problems("countdown", 16, seed=4)
    prompts = [es_grpo.prompt_text(p, tokenizer) for p in problems]
    sampling = Sampling(temperature=1.0, max_new_tokens=8, seed=2, batch_size=4096)
    fast, decoded = FastRollout(), []
    changes = [lambda: None,
               lambda: model.model.layers[0].self_attn.k_proj.bias.add_(1.0),
               lambda: [p.add_(torch.randn_like(p) * 0.02) for p in model.parameters()]]
    for change in changes:
        with torch.no_grad():
            change()
        stepped = fast(model, tokenizer, prompts, sampling)
        assert_same(stepped, FastRollout(stepped=False)(model, tokenizer, prompts, sampling), 0.0)
        decoded.append(stepped.logprobs)
    assert not torch.equal(decoded[0], decoded[1]) and not torch.equal(decoded[1], decoded[2])
    assert sum(isinstance(key, tuple) for key in fast.packs.packed) == 2 * 2


def test_other_models_keep_their_forward(tiny):
    _, tokenizer = tiny
    gpt2 = GPT2LMHeadModel(GPT2Config(vocab_size=len(tokenizer), n_positions=128, n_embd=32,
                                      n_layer=1, n_head=2))
    assert decode_step.fits(tiny[0]) and not decode_step.fits(gpt2)
