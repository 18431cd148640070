"""A real language model end to end: SmolLM2-135M-Instruct (scale/real_model.py's folder) through
the chat template, the stop tokens, the fast HF rollout, ES (batched and member by member), GRPO,
kill and resume, and the vLLM engine where it is installed. .ci/run's real-model tier builds the
folder and sets ES_GRPO_REAL_MODEL to it; elsewhere these tests are skipped (a folder that is named
but missing fails)."""
import copy
import dataclasses
import importlib.util
import json
import math
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import es_grpo
from conftest import ROOT, in_process, remade_report, run_scale

FOLDER = os.environ.get("ES_GRPO_REAL_MODEL", "")
if not FOLDER:
    pytest.skip("set ES_GRPO_REAL_MODEL to scale/real_model.py's folder (.ci/run's real-model "
                "tier)", allow_module_level=True)
assert (Path(FOLDER)
        / "config.json").is_file(), f"ES_GRPO_REAL_MODEL={FOLDER}: no model folder there"

GREEDY = es_grpo.Sampling(max_new_tokens=96, batch_size=256)
SMALL = ["--model", FOLDER, "--task", "add", "--eval-problems", "4", "--eval-samples", "16",
         "--heldout-problems", "2", "--max-new-tokens", "24", "--es-population", "2",
         "--es-prompts", "4",
         "--grpo-prompts", "2", "--grpo-group", "2", "--grpo-lr", "1e-5", "--es-sigma", "1e-3",
         "--es-alpha", "1e-4", "--steps", "2"]


@pytest.fixture(scope="module")
def real():
    torch.set_num_threads(2)  # a 135M model's matmuls pay for a second thread (conftest sets one)
    model, tokenizer = es_grpo.load_model(FOLDER)
    return model, tokenizer


def problems(count: int, seed: int = 1) -> list[dict]:
    return es_grpo.generate_problems("add", count, seed=seed)


def test_the_folder_was_built_and_checked_by_the_converter():
    record = json.loads((Path(FOLDER) / "conversion.json").read_text())
    assert (record["parameters"] == 134_515_008 and record["reward"] == 1.0
            and set(record["eos_ids"]) >= {2})


def test_prompts_go_through_the_chat_template_once(real):
    """A user turn and an open assistant turn, from the model's own template, and no second start
    token."""
    _, tokenizer = real
    prompt = es_grpo.prompt_text(problems(1)[0], tokenizer)
    assert prompt.count("<|im_start|>user\n") == 1 and prompt.endswith("<|im_start|>assistant\n")
    ids = tokenizer(prompt, add_special_tokens=tokenizer.chat_template is None)["input_ids"]
    assert ids[0] == tokenizer.convert_tokens_to_ids("<|im_start|>") and ids[1] != ids[0]


def test_greedy_decoding_stops_at_the_end_of_the_turn(real):
    """Every row that ends before max_new_tokens ends on an end-of-turn id, most rows end, and no
    completion runs on into another turn."""
    model, tokenizer = real
    roll = es_grpo.rollout(model, tokenizer,
                           [es_grpo.prompt_text(p, tokenizer) for p in problems(16)], GREEDY)
    lengths = roll.completion_mask.sum(1)
    ended = lengths < GREEDY.max_new_tokens
    last = roll.completion_ids[torch.arange(len(lengths)), lengths - 1]
    assert ended.float().mean() > 0.8
    assert all(int(token) in es_grpo.eos_ids(model, tokenizer) for token in last[ended])
    assert not any("<|im_start|>" in text or "\nuser\n" in text for text in roll.texts)


def test_the_fast_rollout_decodes_as_es_grpo_rollout_and_bfloat16_mostly_as_float32(real):
    """scale/decode.py at float32 against es_grpo.rollout on 32 greedy rows: the same completions
    (float rounding may flip a near-tie: at most one row); in bfloat16 (a copy), the share of rows
    that decode as float32 does."""
    from scale.decode import FastRollout
    model, tokenizer = real
    prompts = [es_grpo.prompt_text(p, tokenizer) for p in problems(32, seed=2)]
    reference = es_grpo.rollout(model, tokenizer, prompts, GREEDY).texts
    same = sum(a == b
               for a, b in zip(FastRollout()(model, tokenizer, prompts, GREEDY).texts, reference))
    halved = sum(a == b
                 for a, b in zip(FastRollout("bfloat16")(model, tokenizer, prompts, GREEDY).texts,
                          reference))
    print(f"fast float32: {same}/32 rows as es_grpo.rollout; bfloat16: {halved}/32 as float32")
    assert same >= 31 and halved >= 16


def test_the_decode_step_decodes_smollm2_as_its_forward(real, stepped_rows):
    """scale/decode_step.py's step against the model's forward for every new token (both on the HF
    path), 32 greedy rows, float32 and a bfloat16 copy (its projections packed and joined where
    this CPU packs bfloat16): the same completions, log-probs and entropy, bit for bit (bfloat16
    without packs: within its rounding)."""
    from scale.decode import FastRollout, cpu_has_bfloat16
    model, tokenizer = real
    prompts = [es_grpo.prompt_text(p, tokenizer) for p in problems(32, seed=3)]
    for dtype in ("model", "bfloat16"):
        stepped = FastRollout(dtype)(model, tokenizer, prompts, GREEDY)
        # the step ran every new token
        assert len(stepped_rows) == stepped.completion_ids.shape[1] - 1
        stepped_rows.clear()
        forward = FastRollout(dtype, stepped=False)(model, tokenizer, prompts, GREEDY)
        atol = 1e-2 if dtype == "bfloat16" and not cpu_has_bfloat16() else 0.0
        assert stepped.texts == forward.texts
        for name in ("logprobs", "entropy"):
            torch.testing.assert_close(getattr(stepped, name), getattr(forward, name),
                                       atol=atol, rtol=0)


def es_update(model, tokenizer, batched: str) -> tuple[dict, list[torch.Tensor]]:
    from scale import config
    from scale.es import PopulationScorer
    args = config.parse_args(SMALL)
    params = list(model.parameters())
    state = es_grpo.ESState(params, es_grpo.master_weights(params))
    scorer = PopulationScorer(batched=batched, reuse=False)  # es_grpo.es_update draws eps again
    run = es_grpo.Context(args, model, tokenizer, score_members=scorer)
    stats = [es_grpo.es_step(run, state, problems(4, seed=5 + i), seed=i) for i in range(2)]
    return stats, state.master


def test_two_es_updates_batched_and_member_by_member_agree_and_move_the_weights(real):
    model, tokenizer = real
    (batched, master_batched), (in_turn, master_in_turn) = (
        es_update(copy.deepcopy(model), tokenizer, mode) for mode in ("on", "off"))
    assert [s["reward"] for s in batched] == [s["reward"] for s in in_turn]
    base = es_grpo.master_weights(list(model.parameters()))
    moved = max(float((a - b).abs().max()) for a, b in zip(master_in_turn, base))
    apart = max(float((a - b).abs().max()) for a, b in zip(master_batched, master_in_turn))
    print(f"ES at 135M: the update moved weights by up to {moved:.1e}; batched and in turn differ "
          f"by {apart:.1e}")
    assert moved > 0 and apart < 1e-6 and all(torch.isfinite(m).all() for m in master_batched)


def test_es_drawn_once_updates_as_es_grpo_does_on_the_real_model(real):
    """scale/es.py's summed update (what scale.train uses member by member) against
    es_grpo.es_update at 135M: the same member rewards, and masters equal to float32 rounding (a few
    ulps of each weight), over two updates of 8 members (antithetic too: one draw a pair)."""
    from scale import config
    from scale.es import PopulationScorer, Update
    model, tokenizer = real
    for flags in ([], ["--es-antithetic"]):
        args = config.parse_args(SMALL + ["--es-population", "8", *flags])
        found = []
        summed = {"score_members": PopulationScorer(batched="off"), "es_update": Update()}
        for hooks in ({}, summed):
            copied = copy.deepcopy(model)
            params = list(copied.parameters())
            state = es_grpo.ESState(params, es_grpo.master_weights(params))
            run = es_grpo.Context(args, copied, tokenizer, **hooks)
            rewards = [es_grpo.es_step(run, state, problems(4, seed=5 + i), seed=i)
                       ["member_rewards"] for i in range(2)]
            found.append((rewards, state.master))
        (rewards, master), (rewards_once, master_once) = found
        base = es_grpo.master_weights(list(model.parameters()))
        moved = max(float((a - b).abs().max()) for a, b in zip(master, base))
        apart = max(float((a - b).abs().max()) for a, b in zip(master, master_once))
        print(f"ES at 135M {flags}: moved up to {moved:.1e}; drawn once and twice differ by "
              f"{apart:.1e}")
        assert rewards == rewards_once and moved > 0  # the weights' own rounding, a few ulps:
        assert all(torch.allclose(a, b, rtol=1e-6, atol=1e-7) for a, b in zip(master, master_once))


def test_two_grpo_updates_change_the_weights_and_keep_them_finite(real):
    from scale import config
    from scale.grpo import grpo_step
    model, tokenizer = real
    policy = copy.deepcopy(model)
    from scale.decode import cpu_has_bfloat16
    # autocast where the CPU multiplies bfloat16 (on an AVX2 CPU it took 120 s here;
    # tests/test_grpo.py has it)
    args = config.parse_args(SMALL + (["--grpo-autocast"] if cpu_has_bfloat16() else []))
    optimizer = torch.optim.AdamW(policy.parameters(), lr=args.grpo_lr, weight_decay=0.0)
    state = es_grpo.GRPOState(optimizer, copy.deepcopy(model).requires_grad_(False))
    for i in range(2):
        stats = grpo_step(es_grpo.Context(args, policy, tokenizer), state, problems(2, seed=9 + i),
                          seed=i)
        assert all(map(lambda v: not isinstance(v, float) or v == v, stats.values()))
    changed = sum(not torch.equal(a, b) for a, b in zip(policy.parameters(), model.parameters()))
    assert changed > 0 and all(torch.isfinite(p).all() for p in policy.parameters())


@pytest.mark.skipif(importlib.util.find_spec("reasoning_gym") is None,
                    reason="reasoning-gym is not installed (scale/requirements-tasks.txt)")
def test_scale_train_trains_the_real_model_on_a_reasoning_gym_task(tmp_path):
    """--task rg:chain_sum: reasoning-gym's problems, graded by the project's verifier."""
    out = tmp_path / "run"
    flags = [*SMALL[:SMALL.index("--task")], *SMALL[SMALL.index("--task") + 2:]]
    result = run_scale(*flags, "--task", "rg:chain_sum:max_terms=2,max_digits=2", "--out",
                       str(out))
    assert result.returncode == 0, result.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    assert [stage["name"] for stage in summary["stages"]] == ["base", "grpo", "es"]
    assert json.loads((out / "config.json").read_text())["task"].startswith("rg:chain_sum")


def test_the_pilot_measures_the_real_model_on_dev_problems_and_writes_a_plan(tmp_path):
    """`eval.py pilot --quick` (the power plan's command, small): two-digit sums and word problems
    on dev, the seconds of an ES update and a GRPO step, and POWER.md's row for each comparison."""
    import eval as cli
    pilot = cli.main(["pilot", "--model", FOLDER, "--eval-split", "dev", "--eval-problems", "2",
                      "--heldout-problems",
                      "1", "--eval-samples", "32", "--max-new-tokens", "32", "--quick", "--out",
                      str(tmp_path)])
    assert pilot["task"] == "add" and set(pilot["families"]) == {"add", "word"}
    assert all(seconds > 0 for seconds in pilot["updates"]["seconds"].values())
    table = [line for line in (tmp_path / "POWER.md").read_text().splitlines()
             if line.startswith("| ")]
    # the header, a row for each comparison
    assert len(table) == 1 + 6 and "GRPO's entropy falls" in table[4]


def test_a_killed_real_model_run_resumes_bit_identical(tmp_path):
    """`python -m scale.train` ES on the real model, SIGKILLed once its first update's checkpoint is
    written, then --resume: weights and metrics as the uninterrupted run's."""
    flags = [*SMALL, "--algo", "es", "--save-every", "1", "--eval-problems", "1",
             "--heldout-problems", "1"]
    whole = run_scale(*flags, "--out", str(tmp_path / "whole"))
    assert whole.returncode == 0, whole.stderr[-2000:]
    killed = tmp_path / "killed"
    # the killed run's process gets this one's torch threads (the `real` fixture may have set two):
    # a sum over
    # two threads rounds differently from one, and the metrics are compared to the last bit
    threads = {**os.environ, "OMP_NUM_THREADS": str(torch.get_num_threads())}
    process = subprocess.Popen([sys.executable, "-m", "scale.train", *flags, "--out", str(killed)],
                               cwd=ROOT,
                               env=threads, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 600
    while process.poll() is None and time.time() < deadline:
        metrics = killed / "metrics.jsonl"
        if (metrics.exists() and metrics.read_text().count("\n") >= 1
                and (killed / "checkpoint.pt").exists()):
            process.send_signal(signal.SIGKILL)
            break
        time.sleep(0.2)
    process.wait()
    assert not (killed / "summary.json").exists(), "the run finished before it could be killed"
    resumed = run_scale("--resume", str(killed))
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    from safetensors.torch import load_file
    a, b = (load_file(folder / "stage1-es" / "model.safetensors") for folder
            in (tmp_path / "whole", killed))
    assert all(torch.equal(a[k], b[k]) for k in a)
    lines = [[{k: v for k, v in json.loads(line).items() if k not in ("seconds", "seq_per_s")}
              for line in (folder / "metrics.jsonl").read_text().splitlines()]
             for folder in (tmp_path / "whole", killed)]
    assert lines[0] == lines[1]


@pytest.mark.skipif(importlib.util.find_spec("vllm") is None,
                    reason="needs vLLM (the real-model tier installs it)")
def test_es_inside_the_vllm_engine_updates_as_the_hf_path(real):
    """The same ES update with members built inside vLLM's CPU engine (float32) and in the
    transformers model: the share of greedy completions that agree (float kernels differ: oneDNN's
    against torch's), and where every member's completions agree, the same rewards and master bit
    for bit."""
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    from scale import config
    from scale.vllm_rollout import EngineSettings, VLLMRollout
    model, tokenizer = real
    engine = VLLMRollout.launch(EngineSettings(FOLDER, "float32", 0.5, 256, 8192, 256, 0, 600))
    engine.start()
    try:
        args = dataclasses.replace(config.parse_args(SMALL), es_population=4)
        texts = {"engine": [], "hf": []}

        def recording(name, generate):
            def decode(*a, **k):
                roll = generate(*a, **k)
                texts[name].extend(roll.texts)
                return roll
            return decode
        twin = copy.deepcopy(model)
        master = es_grpo.master_weights(list(model.parameters()))
        inside = es_grpo.es_step(es_grpo.Context(args, model, tokenizer,
                                                 recording("engine", engine)),
                                 es_grpo.ESState(engine.es_weights(model), master),
                                 problems(4, seed=7), seed=3)
        params = list(twin.parameters())
        expected_master = es_grpo.master_weights(params)
        outside = es_grpo.es_step(es_grpo.Context(args, twin, tokenizer,
                                                  recording("hf", es_grpo.rollout)),
                                  es_grpo.ESState(params, expected_master), problems(4, seed=7),
                                  seed=3)
        agree = sum(a == b for a, b in zip(texts["engine"], texts["hf"]))
        print(f"vLLM engine against the HF path, float32 greedy: {agree}/{len(texts['hf'])} "
              f"completions agree")
        assert agree >= len(texts["hf"]) // 2
        if agree == len(texts["hf"]):
            assert inside["reward"] == outside["reward"]
            assert all(torch.equal(a, b) for a, b in zip(master, expected_master))
    finally:
        engine.shutdown()


def test_the_gpu_runs_script_in_small_and_the_trajectories_report_on_the_real_model(tmp_path):
    """report/smollm2-add-gpu/h200.sh's quick form (ES and the calibrated GRPO of `eval.py reproduce
    --plan`, two updates of a few rows, on this CPU), the base evaluated with the same settings,
    then `eval.py trajectories`: the real model's report, made as report/smollm2-add-gpu/REPORT.md
    was, end to end.
    The `eval.py reproduce` command the script prints would reuse both runs: its plan gives them the
    settings they were made with."""
    import eval as cli
    from analyses import training
    from scale.config import parse_args
    small = ("--eval-problems 2 --heldout-problems 1 --samples 32 --es-population 2 --es-prompts 2 "
             "--grpo-prompts 2 --grpo-group 2 --grpo-microbatch 2 --max-new-tokens 8 --steps 2")
    env = {**os.environ, "DEVICE": "cpu", "SMALL": small, "RUNS": "es-s0 grpo-s0"}
    done = subprocess.run(["bash", "report/smollm2-add-gpu/h200.sh", FOLDER, str(tmp_path), "900"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=1000)
    assert done.returncode == 0, done.stderr
    assert sorted(path.name for path in (tmp_path / "runs").glob("*-s0")) == ["es-s0", "grpo-s0"]
    cli.main([FOLDER, "--task", "add", "--eval-problems", "2", "--heldout-problems", "1",
              "--eval-samples", "32", "--max-new-tokens", "8", "--out", str(tmp_path / "base")])
    result = cli.main(["trajectories", *(str(p) for p in sorted((tmp_path / "runs").glob("*-s0"))),
                       "--base",
                       str(tmp_path / "base" / "pass_at_k.json"), "--out", str(tmp_path / "real")])
    assert result["roles"] == {"es": "es-s0", "grpo": "grpo-s0"}
    report = (tmp_path / "real" / "REPORT.md").read_text()
    assert ("| es-s0 | ES | alpha 0.001 | 2/2 |" in report
            and "| grpo-s0 | GRPO | lr 1e-05 | 4/4 |" in report)
    assert "## Claim 1" in report
    reproduce = shlex.split(done.stdout.split("the whole report: python eval.py ")[1])
    # the real design's frontier
    assert reproduce[:2] == ["reproduce", "--out"] and "3e-6,3e-5" in reproduce
    plan = in_process(cli.main, *reproduce, "--plan").stdout.splitlines()
    assert len(plan) == 6  # GRPO, ES, GRPO->ES, two more GRPO rates, the null ES run
    for name in ("es-s0", "grpo-s0"):
        line = next(line.split() for line in plan if line.endswith(f"/{name}"))
        assert training.setting_changed(tmp_path / "runs" / name, parse_args(line)) == ""
        assert training.setting_changed(tmp_path / "runs" / name,
                                        parse_args([*line, "--eval-every", "3"])) != ""


def test_the_runs_script_one_at_a_time_lends_the_base_skips_the_finished_and_resumes_the_stopped(
        tmp_path):
    """report/smollm2-add-gpu/h200.sh with ONE_AT_A_TIME (a CPU across sessions), small: GRPO
    measures the base and ES takes it (--base-from); run again, the finished runs are skipped; a run
    stopped after its last checkpoint is resumed, and ends as it had."""
    small = ("--eval-problems 2 --heldout-problems 1 --samples 32 --es-population 2 --es-prompts 2 "
             "--grpo-prompts 2 --grpo-group 2 --grpo-microbatch 2 --max-new-tokens 8 --steps 2")
    env = {**os.environ, "DEVICE": "cpu", "SMALL": small, "RUNS": "es-s0 grpo-s0",
           "ONE_AT_A_TIME": "1", "LAUNCH": "--es-batched off"}
    script = lambda: subprocess.run(["bash", "report/smollm2-add-gpu/h200.sh", FOLDER,  # noqa: E731
                                     str(tmp_path), "900"],
                                    cwd=ROOT, env=env, capture_output=True, text=True, timeout=1000)
    runs = tmp_path / "runs"
    summary = lambda name: json.loads((runs / name
                                       / "summary.json").read_text())["stages"]  # noqa: E731
    assert script().returncode == 0
    grpo, es = summary("grpo-s0"), summary("es-s0")
    assert "the base model's evaluation" not in (runs / "grpo-s0.log").read_text()
    assert f"the base model's evaluation: {runs / 'grpo-s0'}'s" in (runs / "es-s0.log").read_text()
    assert es[0] == grpo[0] and es[-1]["name"] == "es"
    (runs / "es-s0" / "summary.json").unlink()  # as if stopped after its last checkpoint
    logs = {name: (runs / f"{name}.log").read_text() for name in ("es-s0", "grpo-s0")}
    assert script().returncode == 0
    assert (runs / "grpo-s0.log").read_text() == logs["grpo-s0"]  # finished: not started again
    assert "resuming" in (runs / "es-s0.log").read_text()[len(logs["es-s0"]):]
    without_seconds = lambda stages: [{k: v for k, v in s.items() if k != "seconds"} for s
                                       in stages]  # noqa: E731
    assert without_seconds(summary("es-s0")) == without_seconds(es)


def test_the_quick_reproduction_on_the_real_model(tmp_path):
    """`eval.py reproduce --quick` with the real design's model, task, rates and decoding
    (report/smollm2-add-gpu/h200.sh's as this CPU runs it; of its frontier, 3e-5 alone): every
    claims run on SmolLM2 and every analysis of claims 1-5 on it, to REPORT.md, which says what
    changed from the tiny report beside it (report/report.json). (The design's own sizes are out of
    a CPU's reach: claim 5's forgetting control alone reads 200 held-out problems per model.)"""
    import eval as cli
    # as the `real` fixture: a 135M model's matmuls pay for a second thread
    torch.set_num_threads(2)
    out = tmp_path / "real"
    # as report/smollm2-add-cpu's neighbour
    shutil.copy(ROOT / "report" / "report.json", tmp_path / "report.json")
    made = in_process(cli.main, "reproduce", "--quick", "--out", str(out), "--preset", "paper",
                      "--model",
                      FOLDER, "--task", "add", "--max-new-tokens", "8", "--grpo-group", "2",
                      "--grpo-microbatch", "8",
                      "--grpo-lr", "1e-5", "--es-alpha", "1e-3", "--frontier-lrs", "3e-5",
                      "--frontier-alphas", "", "--rollout-dtype", "bfloat16", "--parts", "claims")
    assert made.returncode == 0, made.stderr[-3000:]
    runs = {path.parent.name for path in (out / "runs").glob("*/summary.json")}
    written = json.loads((out / "report.json").read_text())
    # GRPO trained to ES's Pass@1 exists where GRPO's path reaches it (a machine's numerics decide
    # which)
    reached = math.isfinite(written["comparisons"]["ES vs GRPO, at ES's Pass@1"]["where"])
    assert runs == {"es-s0", "grpo-s0", "grpo-es-s0", "grpo-lr3e-05-s0", "es-null-s0"} | (
        {"grpo-matched-s0"} if reached else set())
    config = json.loads((out / "runs" / "es-s0" / "config.json").read_text())
    assert (config["model"], config["rollout_dtype"]) == (FOLDER, "bfloat16")
    claims = written["claims"]
    # claim 6: its part
    assert [claim["verdict"] != "not measured" for claim in claims] == [True] * 5 + [False]
    # one ES rate on it
    assert sum("GRPO's frontier" in part["part"] for part in claims[0]["parts"]) == 1
    assert all(part["outcome"].startswith("undecided")
               or part["part"].startswith("the population's JS part")
               # one seed decides no part that depends on training
               for claim in claims for part in claim["parts"])
    report = (out / "REPORT.md").read_text()
    assert "GRPO at learning rates from 1e-05 to 3e-05 and ES at one alpha" in report
    assert "## What changed with scale" in report and "on the tiny model (" in report
    tiny = json.loads((ROOT / "report" / "report.json").read_text())["claims"][4]["verdict"]
    # the tiny report's
    assert f"| 5. {claims[4]['statement']} | {claims[4]['verdict']} | {tiny} |" in report
    assert "| module kinds by drift | here, largest first | the paper's largest |" in report


def test_the_real_models_report_is_what_the_code_makes_of_its_runs(tmp_path):
    """report/smollm2-add-cpu made again from its committed runs and saved analyses (remade_report,
    as the tiny report's in tests/test_reports.py), with this tier's model as its --model: every
    part as committed, and no outcome moved by the bootstrap's seed."""
    from test_reports import same_report
    _, remade = remade_report(tmp_path, "report/smollm2-add-cpu", FOLDER)
    same_report(ROOT / "report" / "smollm2-add-cpu", remade)
