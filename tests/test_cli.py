"""The command line with tiny arguments, in this process (tests/test_reliability.py runs the script
itself)."""
import dataclasses
import json
import shutil
import sys
from pathlib import Path

import pytest
import torch

import es_grpo
from conftest import (GSM8K, ROOT, SMALL_RUN, TINY_RUN, command, in_process, later, ran,
                      run_es_grpo, run_scale, summary_of)


def test_end_to_end_run_writes_summary_metrics_and_loadable_checkpoints(finished_run):
    out, result = finished_run
    assert result.returncode == 0, result.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    assert [s["name"] for s in summary["stages"]] == ["base", "grpo", "es"]
    for stage in summary["stages"]:
        for key in ("pass@1", "pass@16", "maj@16", "entropy", "heldout_pass@16", "sequences",
                    "tokens", "seconds"):
            assert key in stage
    assert summary["stages"][1]["sequences"] == 2 * 2 and summary["stages"][2]["sequences"] == 2 * 4
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["update"] for m in metrics] == [1,
                                              2] and [m["stage"] for m in metrics] == ["grpo", "es"]
    # a trajectory point every 2 updates, 4 samples: Pass@1 and Pass@4 per problem
    point = metrics[1]["eval"]
    assert "eval" not in metrics[0] and {"pass@1", "pass@4",
                                         "entropy"} <= point.keys() and "pass@16" not in point
    assert len(point["correct"]) == 3 and all(0 <= c <= 4 for c in point["correct"])
    assert point["pass@1"] == pytest.approx(sum(point["correct"]) / 12)
    assert len(summary["stages"][2]["correct"]) == 3  # per-problem counts at each stage's end too
    config = json.loads((out / "config.json").read_text())
    assert config["es_population"] == 2 and config["algo"] == "grpo-es"
    from transformers import AutoModelForCausalLM, AutoTokenizer
    model = AutoModelForCausalLM.from_pretrained(out / "stage2-es")
    tokenizer = AutoTokenizer.from_pretrained(out / "stage2-es")
    assert (tokenizer.decode(tokenizer("C3,5,7=56:").input_ids) == "C3,5,7=56:"
            and model.num_parameters() > 0)
    assert "| base |" in result.stdout and "| es |" in result.stdout
    again = run_es_grpo(*TINY_RUN, "--out", str(out))  # never overwrite a finished run silently
    assert again.returncode != 0 and "exists" in again.stderr


def test_paper_preset_resolves_the_papers_settings(tmp_path):
    from scale.config import parse_args
    args = parse_args(["--preset", "paper", "--es-population", "16"])
    assert (args.es_population, args.es_sigma, args.es_alpha,
            args.es_prompts) == (16, 1.5e-3, 2.5e-4, 64)
    assert (args.grpo_group, args.grpo_lr, args.grpo_beta, args.grpo_clip,
            args.eval_temperature) == \
        (8, 1e-6, 1e-3, 0.2, 0.6)


@pytest.mark.parametrize("flags, message", [
    (["--es-population", "1"], "--es-population"),
    (["--es-sigma", "0"], "--es-sigma"),
    (["--grpo-lr", "-1"], "--grpo-lr"),
    (["--steps", "0"], "--steps"),
    (["--algo", "ppo"], "--algo"),
    (["--eval-samples", "8"], "--eval-samples"),
    (["--save-every", "-1"], "--save-every"),
    (["--steps", "ten"], "--steps"),
    (["--no-such-flag", "1"], "--no-such-flag"),
    (["--grpo-temperature", "0"], "--grpo-temperature"),
    (["--eval-problems", "501"], "--eval-problems 501: the built-in set has 500"),
    (["--resume", "runs/x"], "unrecognized arguments: --resume"),  # checkpoints are scale.train's
    (["--overwrite"], "unrecognized arguments: --overwrite"),  # and so is replacing a run
    (["--data", "x.jsonl"], "unrecognized arguments: --data"),  # data files are scale.train's
    (["--device", "cuda:99"], "--device cuda:99: not usable here"),  # no such GPU, here or anywhere
])
def test_invalid_flags_exit_2_before_any_work(flags, message, tmp_path):
    result = run_es_grpo(*flags, "--out", str(tmp_path / "never"))
    assert (result.returncode == 2 and len(result.stderr.splitlines()) == 1
            and message in result.stderr)
    assert not (tmp_path / "never").exists()


@pytest.mark.parametrize("flags, message", [
    (["--preset", "huge"], "--preset"),
    (["--grpo-microbatch", "-2"], "--grpo-microbatch"),
    (["--grpo-epochs", "0"], "--grpo-epochs"),
    # es_grpo.py's checks hold too
    (["--es-population", "1"], "--es-population must be at least 2"),
    (["--data", str(ROOT / "no-such.jsonl")], "no-such.jsonl: cannot read"),
    (["--es-noise", "table", "--rollout", "vllm"], "--es-noise table runs on one process"),
])
def test_scale_trains_flags_exit_2_before_any_work(flags, message, tmp_path):
    result = run_scale(*flags, "--out", str(tmp_path / "never"))
    assert (result.returncode == 2 and len(result.stderr.splitlines()) == 1
            and message in result.stderr)
    assert not (tmp_path / "never").exists()


def test_sharded_grpo_needs_prompts_that_split_evenly_over_the_ranks(tmp_path, monkeypatch):
    # scale/train.py reads WORLD_SIZE as torchrun sets it, before any process group exists
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    from scale import train
    result = in_process(train.main, "--grpo-fsdp", "--grpo-prompts", "3", "--out",
                        str(tmp_path / "never"))
    assert result.returncode == 2 and len(result.stderr.splitlines()) == 1
    assert "--grpo-fsdp needs --grpo-prompts divisible by the number of ranks (2)" in result.stderr
    assert not (tmp_path / "never").exists()


def test_pretrain_command_builds_a_loadable_model(tmp_path):
    from tiny_model.pretrain import main
    result = in_process(main, "--steps", "2", "--batch", "8", "--hidden-size", "32",
                        "--intermediate-size", "64",
                        "--layers", "2", "--heads", "2", "--no-tie-embeddings", "--out",
                        str(tmp_path / "m"))
    assert result.returncode == 0, result.stderr[-2000:]
    record = json.loads((tmp_path / "m" / "pretrain.json").read_text())
    assert record["steps"] == 2 and record["seed"] == 0
    assert record["command"].startswith("python tiny_model/pretrain.py")
    import es_grpo
    model, tokenizer = es_grpo.load_model(str(tmp_path / "m"))
    assert tokenizer.pad_token_id == 0 and model.config.vocab_size == len(tokenizer)
    assert (model.config.hidden_size, model.config.num_hidden_layers,
            record["tie_embeddings"]) == (32, 2, False)
    # untied: two matrices
    assert model.lm_head.weight.data_ptr() != model.model.embed_tokens.weight.data_ptr()
    assert in_process(main, "--heads", "3").returncode == 2  # 128 does not divide by 3
    assert "--hidden-size" in in_process(main, "--help").stdout


def test_countdown_jsonl_data_and_a_chat_template_model_from_local_files(tmp_path):
    """A local folder with a chat template and a Countdown JSONL file (math data with a BPE chat
    model: test_a_bpe_chat_model_with_bos_and_an_end_of_turn_token_end_to_end)."""
    from tiny_model.pretrain import build_tiny_model
    model, tokenizer = build_tiny_model(seed=0)
    tokenizer.chat_template = ("{% for m in messages %}{{ m['content'] }}{% endfor %}"
                               "{% if add_generation_prompt %}:{% endif %}")
    model.save_pretrained(tmp_path / "chat")
    tokenizer.save_pretrained(tmp_path / "chat")
    countdown = tmp_path / "countdown.jsonl"
    countdown.write_text("".join(json.dumps({"numbers": [a, 2, 3],
                                             "target": a + 5}) + "\n" for a in range(10)))
    out = tmp_path / "countdown"
    result = run_scale(*TINY_RUN, "--model", str(tmp_path / "chat"), "--data", str(countdown),
                       "--out", str(out), "--max-new-tokens", "4")
    assert result.returncode == 0, result.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    assert [s["name"] for s in summary["stages"]] == ["base", "grpo", "es"]
    assert 0.0 <= summary["stages"][-1]["pass@1"] <= 1.0
    # the last fifth of the 10 lines is held out
    assert "8 training / 2 eval problems" in result.stdout


def test_es_grpo_py_refuses_to_run_under_torchrun(tmp_path, monkeypatch):
    """Every rank would write the same run folder: scale/train.py is the multi-process entry point.
    The script's own __main__ block, run in this process."""
    import runpy
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setattr(sys, "argv", ["es_grpo.py", "--out", str(tmp_path / "never")])
    result = in_process(lambda argv: runpy.run_path(str(ROOT / "es_grpo.py"), run_name="__main__"))
    assert result.returncode == 1 and result.stderr.strip().endswith(
        "under torchrun, run -m scale.train (same flags)")
    assert not (tmp_path / "never").exists()


def test_es_grpo_py_stands_alone_beside_the_tiny_models_data(tmp_path, monkeypatch):
    """es_grpo.py imports nothing from scale/, eval.py or tiny_model/pretrain.py: by its source, and
    by loading a copy of it with those modules made unimportable."""
    import ast
    import importlib.util

    tree = ast.parse((ROOT / "es_grpo.py").read_text())
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias
                 in node.names}
    assert not {name for name in imported if name.split(".")[0] in ("scale", "eval") or "pretrain"
                in name}
    for name in ("scale", "eval", "tiny_model.pretrain"):
        monkeypatch.setitem(sys.modules, name, None)  # importing any of them now raises ImportError
    shutil.copy(ROOT / "es_grpo.py", tmp_path / "alone.py")
    spec = importlib.util.spec_from_file_location("alone", tmp_path / "alone.py")
    alone = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "alone", alone)  # dataclasses look their module up there
    spec.loader.exec_module(alone)
    assert alone.TINY_MODEL == ROOT / "tiny_model" and callable(alone.run)


STANDALONE: dict = {}  # the reader's copy's commands, started as the session begins (conftest.py)


def start_standalone_copy(root: Path):
    """es_grpo.py and tiny_model/ copied to a folder of their own; its --help and a run, in
    conftest.later's lane."""
    if STANDALONE:
        return

    def started():
        shutil.copy(ROOT / "es_grpo.py", root / "es_grpo.py")
        shutil.copytree(ROOT / "tiny_model", root / "tiny_model",
                        ignore=shutil.ignore_patterns("__pycache__"))
        done = []
        for name, argv in (("help", ["--help"]), ("run", [*TINY_RUN, "--out", "run"])):
            (logs := root / f"logs-{name}").mkdir()
            done.append(ran(command(["es_grpo.py", *argv], root, logs, PYTHONPATH=""), logs))
        return done
    STANDALONE.update(root=root, done=later(started))


def test_es_grpo_py_copied_alone_beside_tiny_model_answers_help_and_trains(tmp_path):
    """A reader's copy: es_grpo.py and tiny_model/ in a folder of their own, nothing else of the
    project on the path: --help, and a 2-update GRPO->ES run that prints its table."""
    start_standalone_copy(tmp_path)  # if the session did not start it
    helped, trained = STANDALONE["done"].result()
    assert helped.returncode == 0 and "--es-population" in helped.stdout, helped.stderr[-1000:]
    assert trained.returncode == 0, trained.stderr[-2000:]
    assert ("| es |" in trained.stdout + trained.stderr
            and (STANDALONE["root"] / "run" / "summary.json").exists())


@pytest.mark.filterwarnings("ignore:'scale.train' found in sys.modules")  # other tests imported it
def test_scale_is_a_package_its_entry_point_runs_with_dash_m(monkeypatch):
    """`torchrun ... -m scale.train` from the repository's root, as README says: no sys.path edits;
    the module runs as -m runs it (runpy), in this process."""
    import runpy

    assert not [path for path in (ROOT / "scale").glob("*.py") if "sys.path" in path.read_text()]
    monkeypatch.setattr(sys, "argv", ["scale/train.py", "--help"])
    result = in_process(lambda argv: runpy.run_module("scale.train", run_name="__main__"))
    assert (result.returncode == 0 and "--rollout" in result.stdout and "--dist-timeout"
            in result.stdout)


def bpe_chat_model(folder):
    """A byte-level BPE tokenizer that adds BOS, with a chat template whose end-of-turn token is not
    its EOS (generation_config lists both, as Qwen2.5-Instruct does), and a small random Llama:
    built locally."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import (GenerationConfig, LlamaConfig, LlamaForCausalLM,
                              PreTrainedTokenizerFast)
    specials = ["<s>", "</s>", "<|im_end|>", "<pad>"]
    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer, backend.decoder = (
        pre_tokenizers.ByteLevel(add_prefix_space=False), decoders.ByteLevel())
    corpus = [record["question"] + " " + record["answer"] for record in GSM8K] * 5
    backend.train_from_iterator(corpus, trainers.BpeTrainer(
        vocab_size=400, special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    backend.post_processor = processors.TemplateProcessing(
        single="<s> $A", special_tokens=[("<s>", 0)])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, bos_token="<s>",
                                        eos_token="</s>", pad_token="<pad>")
    tokenizer.chat_template = ("{{ bos_token }}{% for m in messages %}"
                               "user: {{ m['content'] }}<|im_end|>{% endfor %}"
                               "{% if add_generation_prompt %}assistant: {% endif %}")
    ids = {token: tokenizer.convert_tokens_to_ids(token) for token in specials}
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64,
                         num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2,
                         max_position_embeddings=512, bos_token_id=ids["<s>"],
                         eos_token_id=ids["</s>"], pad_token_id=ids["<pad>"])
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    model.generation_config = GenerationConfig(bos_token_id=ids["<s>"],
                                               eos_token_id=[ids["</s>"], ids["<|im_end|>"]])
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return ids


def test_a_bpe_chat_model_with_bos_and_an_end_of_turn_token_end_to_end(tmp_path):
    ids = bpe_chat_model(tmp_path / "chat")
    model, tokenizer = es_grpo.load_model(str(tmp_path / "chat"))
    assert es_grpo.eos_ids(model, tokenizer) == sorted([ids["</s>"], ids["<|im_end|>"]])
    prompt = es_grpo.prompt_text({"task": "math", "question": GSM8K[0]["question"]}, tokenizer)
    roll = es_grpo.rollout(model, tokenizer, [prompt], es_grpo.Sampling(max_new_tokens=4))
    # one BOS, not two
    assert roll.prompt_ids[0, 0] == ids["<s>"] and roll.prompt_ids[0, 1] != ids["<s>"]
    # a model that always ends its turn: it must stop there
    head = torch.nn.Linear(32, len(tokenizer))
    with torch.no_grad():
        head.weight.zero_()
        head.bias.zero_()[ids["<|im_end|>"]] = 10.0
    model.lm_head = head
    ended = es_grpo.rollout(model, tokenizer, [prompt, prompt],
                            es_grpo.Sampling(1.0, max_new_tokens=8))
    assert (ended.completion_ids[:, 0].tolist() == [ids["<|im_end|>"]] * 2
            and ended.completion_mask.sum() == 2)
    data = tmp_path / "gsm8k.jsonl"
    data.write_text("".join(json.dumps(record) + "\n" for record in GSM8K * 4))
    out = tmp_path / "run"
    result = run_scale(*SMALL_RUN, "--model", str(tmp_path / "chat"), "--data", str(data), "--out",
                       str(out))
    assert result.returncode == 0, result.stderr[-2000:]
    assert [s["name"] for s in summary_of(out)] == ["base", "grpo", "es"]
    assert "held out: countdown, add, sort" in result.stdout  # a chat model is asked every family


def test_an_entropy_the_backend_cannot_give_is_null_and_the_files_stay_strict_json(tmp_path):
    """vLLM returns no full-vocabulary entropy (scale/vllm_rollout.py: NaN): metrics.jsonl and
    summary.json say null, never the bare NaN that strict JSON readers reject."""
    def without_entropy(*inputs, **options):
        roll = es_grpo.rollout(*inputs, **options)
        return dataclasses.replace(roll, entropy=torch.full_like(roll.entropy, float("nan")))

    def refuse(constant):
        raise ValueError(f"not JSON: {constant}")
    out = tmp_path / "run"
    es_grpo.run(es_grpo.parse_args([*SMALL_RUN, "--algo", "es", "--steps", "1", "--out", str(out)]),
                generate=without_entropy)
    summary = json.loads((out / "summary.json").read_text(), parse_constant=refuse)
    metrics = [json.loads(line, parse_constant=refuse)
               for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert ([s["entropy"] for s in summary["stages"]] == [None, None]
            and metrics[0]["entropy"] is None)
    assert all(0.0 <= s["pass@1"] <= 1.0 for s in summary["stages"])  # the rest is unaffected
