"""Every path README promises, at the smallest settings that still show it: bad inputs and the retry after the
fix, --overwrite, --eval-data/--task, --grpo-epochs > 1, --eval-top-p < 1, --es-temperature > 0, --no-es-zscore,
--dtype bfloat16, a resume at the stage boundary of es-grpo, and a BPE chat model with BOS and an end-of-turn
token through the command line."""
import copy
import dataclasses
import json

import pytest
import torch
from safetensors.torch import load_file

import es_grpo
from conftest import run_es_grpo
from test_es import es_step_recording_rewards
from test_verifier import GSM8K

SMALL = ["--steps", "2", "--es-population", "2", "--es-prompts", "2", "--grpo-prompts", "2", "--grpo-group", "2",
         "--eval-problems", "2", "--heldout-problems", "1", "--eval-samples", "16", "--max-new-tokens", "6"]


def summary_of(out):
    return [{k: v for k, v in stage.items() if k != "seconds"}
            for stage in json.loads((out / "summary.json").read_text())["stages"]]


def countdown_file(path, count, start=0):
    path.write_text("".join(json.dumps({"numbers": [a, 2, 3], "target": a + 5}) + "\n"
                            for a in range(start, start + count)))
    return path


def test_bad_data_or_model_exits_2_with_one_line_leaves_nothing_and_the_retry_just_works(tmp_path):
    data, out = tmp_path / "train.jsonl", tmp_path / "run"
    data.write_text('{"numbers": [1, 2, 3], "target": 6}\n{oops\n')
    for flags, message in [(["--data", str(data)], f"{data}:2: not valid JSON"),
                           (["--data", str(tmp_path / "nowhere.jsonl")], "nowhere.jsonl: cannot read"),
                           (["--model", str(tmp_path / "typo")], "typo: no such folder"),
                           (["--model", str(tmp_path)], "has no config.json")]:
        refused = run_es_grpo(*SMALL, "--algo", "es", *flags, "--out", str(out))
        said = refused.stderr.splitlines()
        assert refused.returncode == 2 and len(said) == 1 and said[0].startswith("error: ")
        assert message in refused.stderr and "Traceback" not in refused.stderr
        assert not out.exists()  # nothing written: the same command works once the input is fixed
    countdown_file(data, 12)
    fixed = run_es_grpo(*SMALL, "--algo", "es", "--data", str(data), "--out", str(out))
    assert fixed.returncode == 0, fixed.stderr[-2000:]
    assert "Loading weights" not in fixed.stdout + fixed.stderr  # transformers' bars are silenced
    assert (out / "summary.json").exists()


def test_overwrite_replaces_a_finished_run_and_a_refused_overwrite_keeps_it(tmp_path):
    out = tmp_path / "run"
    assert run_es_grpo(*SMALL, "--algo", "es", "--steps", "1", "--out", str(out)).returncode == 0
    (out / "notes.txt").write_text("mine")
    again = run_es_grpo(*SMALL, "--algo", "es", "--steps", "1", "--out", str(out))
    assert again.returncode == 2 and "--overwrite" in again.stderr and (out / "notes.txt").exists()
    broken = tmp_path / "broken.jsonl"
    broken.write_text("{")
    refused = run_es_grpo(*SMALL, "--algo", "es", "--data", str(broken), "--overwrite", "--out", str(out))
    assert refused.returncode == 2 and (out / "notes.txt").exists()  # a bad input never costs a saved run
    replaced = run_es_grpo(*SMALL, "--algo", "grpo", "--steps", "1", "--overwrite", "--out", str(out))
    assert replaced.returncode == 0, replaced.stderr[-2000:]
    assert not (out / "notes.txt").exists() and [s["name"] for s in summary_of(out)] == ["base", "grpo"]
    assert json.loads((out / "config.json").read_text())["algo"] == "grpo"


def test_eval_data_and_task_choose_the_problems(tmp_path):
    train, evaluation = countdown_file(tmp_path / "train.jsonl", 10), countdown_file(tmp_path / "eval.jsonl", 3, 50)
    out = tmp_path / "run"
    result = run_es_grpo(*SMALL, "--algo", "es", "--steps", "1", "--eval-problems", "5", "--data", str(train),
                         "--eval-data", str(evaluation), "--task", "countdown", "--out", str(out))
    assert result.returncode == 0, result.stderr[-2000:]
    assert "10 training / 3 eval problems" in result.stdout  # all of --data trains; --eval-data evaluates
    assert len(summary_of(out)[0]["correct"]) == 3
    as_math = run_es_grpo(*SMALL, "--data", str(train), "--task", "math", "--out", str(tmp_path / "never"))
    assert as_math.returncode == 2 and "train.jsonl:1: math needs 'question'" in as_math.stderr


def test_more_than_one_grpo_epoch_reuses_the_sampling_policy_and_clips(fresh_tiny):
    """With --grpo-epochs 2 the second pass compares against the policy that sampled (ratio != 1, clipping
    can engage); with one epoch the ratio is 1 by construction."""
    model, tokenizer = fresh_tiny
    problems = es_grpo.generate_problems("countdown", 4, seed=3)
    clipped = {}
    for epochs in (1, 2):
        trained = copy.deepcopy(model)
        optimizer = torch.optim.AdamW(trained.parameters(), lr=1e-2)
        args = es_grpo.Args(grpo_prompts=4, grpo_group=4, grpo_epochs=epochs, grpo_beta=0.0)
        clipped[epochs] = es_grpo.grpo_step(trained, None, optimizer, tokenizer, problems, args, seed=0)["clip_frac"]
    assert clipped[1] == 0.0 and clipped[2] > 0.0


def test_eval_top_p_keeps_only_the_nucleus(tiny):
    """A nucleus too small to hold two tokens is greedy decoding, whatever the temperature."""
    model, tokenizer = tiny
    problems = es_grpo.generate_problems("countdown", 4, seed=4)
    args = es_grpo.Args(eval_samples=16, eval_temperature=1.0, max_new_tokens=6)

    def completions(**changes):  # what evaluate decoded with these flags
        texts = []
        def generate(*inputs, **options):
            texts.extend(es_grpo.rollout(*inputs, **options).texts)
            return es_grpo.rollout(*inputs, **options)
        es_grpo.evaluate(model, tokenizer, problems, dataclasses.replace(args, **changes), generate=generate)
        return texts
    greedy = completions(eval_temperature=0.0)
    assert completions(eval_top_p=1e-6) == greedy
    assert completions() != greedy  # the control: the full distribution at this temperature is not greedy


def test_sampled_es_gives_every_member_the_same_sampling_noise(fresh_tiny):
    """--es-temperature > 0 (departure 2): members differ only by their weights. With a sigma too small to move
    any fp32 weight, every member samples the same completions, so rewards agree and nothing moves."""
    model, tokenizer = fresh_tiny
    problems = es_grpo.generate_problems("countdown", 8, seed=6)
    args = es_grpo.Args(es_population=6, es_prompts=8, es_temperature=1.0, es_sigma=1e-20, max_new_tokens=6)
    stats, rewards, _, texts = es_step_recording_rewards(model, tokenizer, problems, args)
    assert len(set(texts)) > 1  # sampled, not greedy: the prompts' completions vary
    assert all(texts[i::8] == texts[i::8][:1] * 6 for i in range(8))  # a prompt's completion is every member's
    assert stats["reward_std"] == 0.0 and torch.equal(rewards, rewards[:1].expand(6))
    moved, _, _, _ = es_step_recording_rewards(model, tokenizer, problems, dataclasses.replace(args, es_sigma=3e-2))
    assert moved["reward_std"] > 0.0  # the control: perturbations that move weights do change the samples


def test_es_without_zscore_steps_along_centred_raw_rewards(fresh_tiny, monkeypatch):
    """--no-es-zscore: theta <- theta + alpha / N * sum_n (r_n - mean r) eps_n, on the raw rewards."""
    model, tokenizer = fresh_tiny
    problems = es_grpo.generate_problems("countdown", 8, seed=7)
    args = es_grpo.Args(es_population=4, es_prompts=8, es_zscore=False, es_alpha=0.5, es_sigma=3e-2,
                        es_batched="off", max_new_tokens=6)
    params = list(model.parameters())
    master = es_grpo.master_weights(params)
    before, scored, score = [m.clone() for m in master], [], es_grpo.score
    monkeypatch.setattr(es_grpo, "zscore", lambda r: pytest.fail("--no-es-zscore must not z-score"))
    monkeypatch.setattr(es_grpo, "score", lambda p, t: scored.append(score(p, t)) or scored[-1])
    es_grpo.es_step(model, params, master, tokenizer, problems, args, seed=1)
    rewards = torch.stack([member.mean() for member in scored]).float()  # (N,) one member at a time
    assert len(scored) == 4 and rewards.max() > rewards.min(), "no reward spread: pick other problems"
    seeds = es_grpo.random.Random(1).sample(range(2**31 - 1), 4)  # es_step's draw for seed 1
    for index in (0, len(before) - 1):
        step = sum(float(w) * es_grpo.noise(s, index, before[index]) for s, w in zip(seeds, rewards - rewards.mean()))
        torch.testing.assert_close(master[index], before[index] + 0.5 / 4 * step, atol=1e-6, rtol=0)


def test_bfloat16_weights_train_from_an_fp32_master(tmp_path):
    out = tmp_path / "run"
    result = run_es_grpo(*SMALL, "--algo", "es", "--steps", "2", "--save-every", "1", "--dtype", "bfloat16",
                         "--es-alpha", "0.05", "--out", str(out))
    assert result.returncode == 0, result.stderr[-2000:]
    trained = load_file(out / "stage1-es" / "model.safetensors")
    base = load_file(es_grpo.TINY_MODEL / "model.safetensors")
    assert {t.dtype for t in trained.values()} == {torch.bfloat16}
    assert any(not torch.equal(trained[k], base[k].bfloat16()) for k in trained)  # the update survived rounding
    stages = summary_of(out)
    assert all(0.0 <= s["pass@1"] <= 1.0 and s["entropy"] == s["entropy"] for s in stages)


def test_es_grpo_resumed_at_the_stage_boundary_ends_as_the_uninterrupted_run(tmp_path, monkeypatch):
    """Interrupted just after the ES stage ended (its checkpoint says: stage 1 done, no stage state), then
    resumed: GRPO starts fresh from the ES weights, as in the uninterrupted run."""
    flags = [*SMALL, "--algo", "es-grpo"]
    assert run_es_grpo(*flags, "--out", str(tmp_path / "whole")).returncode == 0
    train_stage = es_grpo.train_stage

    def stop_before_grpo(run, name, *args):
        if name == "grpo":
            raise KeyboardInterrupt
        return train_stage(run, name, *args)

    monkeypatch.setattr(es_grpo, "train_stage", stop_before_grpo)
    with pytest.raises(KeyboardInterrupt):
        run_es_grpo(*flags, "--out", str(tmp_path / "cut"))
    checkpoint = torch.load(tmp_path / "cut" / "checkpoint.pt", weights_only=False)
    assert checkpoint["stage"] == 1 and checkpoint["stage_state"] is None
    monkeypatch.setattr(es_grpo, "train_stage", train_stage)
    resumed = run_es_grpo("--resume", str(tmp_path / "cut"))
    assert resumed.returncode == 0 and "after update 1" in resumed.stdout
    a, b = (load_file(tmp_path / run / "stage2-grpo" / "model.safetensors") for run in ("whole", "cut"))
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert summary_of(tmp_path / "whole") == summary_of(tmp_path / "cut")


def bpe_chat_model(folder):
    """A byte-level BPE tokenizer that adds BOS, with a chat template whose end-of-turn token is not its EOS
    (generation_config lists both, as Qwen2.5-Instruct does), and a small random Llama: built locally."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast
    specials = ["<s>", "</s>", "<|im_end|>", "<pad>"]
    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer, backend.decoder = pre_tokenizers.ByteLevel(add_prefix_space=False), decoders.ByteLevel()
    corpus = [record["question"] + " " + record["answer"] for record in GSM8K] * 5
    backend.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=400, special_tokens=specials,
                                                            initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    backend.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 0)])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, bos_token="<s>", eos_token="</s>",
                                        pad_token="<pad>")
    tokenizer.chat_template = ("{{ bos_token }}{% for m in messages %}user: {{ m['content'] }}<|im_end|>{% endfor %}"
                               "{% if add_generation_prompt %}assistant: {% endif %}")
    ids = {token: tokenizer.convert_tokens_to_ids(token) for token in specials}
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=512,
                         bos_token_id=ids["<s>"], eos_token_id=ids["</s>"], pad_token_id=ids["<pad>"])
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    model.generation_config = GenerationConfig(bos_token_id=ids["<s>"], eos_token_id=[ids["</s>"], ids["<|im_end|>"]])
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return ids


def test_a_bpe_chat_model_with_bos_and_an_end_of_turn_token_end_to_end(tmp_path):
    ids = bpe_chat_model(tmp_path / "chat")
    model, tokenizer = es_grpo.load_model(str(tmp_path / "chat"))
    assert es_grpo.eos_ids(model, tokenizer) == sorted([ids["</s>"], ids["<|im_end|>"]])
    prompt = es_grpo.prompt_text({"task": "math", "question": GSM8K[0]["question"]}, tokenizer)
    roll = es_grpo.rollout(model, tokenizer, [prompt], max_new_tokens=4)
    assert roll.prompt_ids[0, 0] == ids["<s>"] and roll.prompt_ids[0, 1] != ids["<s>"]  # one BOS, not two
    head = torch.nn.Linear(32, len(tokenizer))  # a model that always ends its turn: it must stop there
    with torch.no_grad():
        head.weight.zero_()
        head.bias.zero_()[ids["<|im_end|>"]] = 10.0
    model.lm_head = head
    ended = es_grpo.rollout(model, tokenizer, [prompt, prompt], max_new_tokens=8, temperature=1.0)
    assert ended.completion_ids[:, 0].tolist() == [ids["<|im_end|>"]] * 2 and ended.completion_mask.sum() == 2
    data = tmp_path / "gsm8k.jsonl"
    data.write_text("".join(json.dumps(record) + "\n" for record in GSM8K * 4))
    out = tmp_path / "run"
    result = run_es_grpo(*SMALL, "--model", str(tmp_path / "chat"), "--data", str(data), "--out", str(out))
    assert result.returncode == 0, result.stderr[-2000:]
    assert [s["name"] for s in summary_of(out)] == ["base", "grpo", "es"]
    assert "held out: countdown, add, sort" in result.stdout  # a chat model is asked every family


def test_an_entropy_the_backend_cannot_give_is_null_and_the_files_stay_strict_json(tmp_path):
    """vLLM returns no full-vocabulary entropy (scale/vllm_rollout.py: NaN): metrics.jsonl and summary.json
    say null, never the bare NaN that strict JSON readers reject."""
    def without_entropy(*inputs, **options):
        roll = es_grpo.rollout(*inputs, **options)
        return dataclasses.replace(roll, entropy=torch.full_like(roll.entropy, float("nan")))

    def refuse(constant):
        raise ValueError(f"not JSON: {constant}")
    out = tmp_path / "run"
    es_grpo.run(es_grpo.parse_args([*SMALL, "--algo", "es", "--steps", "1", "--out", str(out)]),
                generate=without_entropy)
    summary = json.loads((out / "summary.json").read_text(), parse_constant=refuse)
    metrics = [json.loads(line, parse_constant=refuse) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [s["entropy"] for s in summary["stages"]] == [None, None] and metrics[0]["entropy"] is None
    assert all(0.0 <= s["pass@1"] <= 1.0 for s in summary["stages"])  # the rest is unaffected
