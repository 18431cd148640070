"""What is reused and what is made again: finished runs, lost weights and other settings
(analyses/training.py), saved analyses and their keys (analyses/reproduction/reuse.py)."""
import dataclasses
import json
import shutil

import pytest

from analyses import diversity, forgetting, paths, training
from analyses.evaluation import versioned
from analyses.reproduction import reuse
from scale.config import Args


def test_a_run_path_spans_both_stages_and_finished_runs_are_reused(tmp_path):
    from conftest import TINY_RUN
    out = tmp_path / "run"
    flags = [*TINY_RUN, "--steps", "4", "--eval-every", "1", "--trajectory-samples", "4"]
    summary = training.train_run(out, flags)
    path = paths.run_path(out, 4)
    # base, trajectory, GRPO's end, trajectory, ES's end
    assert [p["update"] for p in path] == [0, 1, 2, 3, 4]
    stages = summary["stages"]
    assert (path[2]["sequences"] == stages[1]["sequences"]
            and path[4]["sequences"] == stages[1]["sequences"] + stages[2]["sequences"])
    assert all(a["seconds"] <= b["seconds"] and a["sequences"] < b["sequences"]
               for a, b in zip(path, path[1:]))
    assert all(len(p["pass@1"]) == 3 for p in path)
    written = (out / "metrics.jsonl").stat().st_mtime_ns
    assert (training.train_run(out, flags) == summary
            and (out / "metrics.jsonl").stat().st_mtime_ns == written)
    (out / "summary.json").unlink()  # interrupted after its last checkpoint: resumed, not rerun
    assert training.train_run(out, flags)["stages"][-1]["pass@1"] == stages[-1]["pass@1"]
    assert len((out / "metrics.jsonl").read_text().splitlines()) == 4
    with pytest.raises(SystemExit) as refused:  # other settings: refused, the run kept
        training.train_run(out, [*flags, "--seed", "1"])
    assert (refused.value.code == 2 and "a run made with --seed 0 (this one: 1)"
            in refused.value.message)
    assert training.train_run(out, flags) == json.loads((out / "summary.json").read_text())


def test_a_runs_lost_weights_come_back_bit_for_bit_without_its_evaluations(tmp_path, capsys):
    """A committed run keeps its settings, metrics and summary; its weights are trained again
    unevaluated, kept only where every update's training metrics are the run's own (its rewards
    exactly, a forward pass's numbers to rounding), else left for a full training."""
    from conftest import TINY_RUN
    out = tmp_path / "run"
    training.train_run(
        out, [*TINY_RUN, "--steps", "4", "--eval-every", "2", "--trajectory-samples", "4"])
    stages = sorted(out.glob("stage*-*"))
    weights = {stage.name: (stage / "model.safetensors").read_bytes() for stage in stages}
    kept = {name: (out / name).read_bytes()
            for name in ("config.json", "metrics.jsonl", "summary.json")}
    for stage in stages:
        shutil.rmtree(stage)
    assert training.weights_again(out)
    assert {stage.name: (stage / "model.safetensors").read_bytes() for stage in stages} == weights
    assert ({name: (out / name).read_bytes() for name in kept} == kept
            and not (out / "again").exists())
    lines = kept["metrics.jsonl"].decode().splitlines()
    # another CPU's
    rounded = json.loads(lines[1]) | {"entropy": json.loads(lines[1])["entropy"] * (1 + 1e-6)}
    (out / "metrics.jsonl").write_text(
        "\n".join([lines[0], json.dumps(rounded), *lines[2:]]) + "\n")
    shutil.rmtree(stages[-1])
    assert training.weights_again(out)  # a forward pass's number to rounding: the same training
    # another training's
    changed = json.loads(lines[1]) | {"reward": json.loads(lines[1])["reward"] + 1e-9}
    (out / "metrics.jsonl").write_text(
        "\n".join([lines[0], json.dumps(changed), *lines[2:]]) + "\n")
    shutil.rmtree(stages[-1])
    assert (not training.weights_again(out) and not stages[-1].exists()
            and not (out / "again").exists())
    # stopped there
    assert f"update 2's reward is {json.loads(lines[1])['reward']!r}" in capsys.readouterr().out
    # ES alone: replayed from its members' rewards
    for name, null in (("es", []), ("null", ["--es-null"])):
        es = tmp_path / name
        training.train_run(es, [*TINY_RUN, "--algo", "es", "--steps", "3", *null])
        trained = (es / "stage1-es" / "model.safetensors").read_bytes()
        shutil.rmtree(es / "stage1-es")
        assert (training.weights_again(es)
                and (es / "stage1-es" / "model.safetensors").read_bytes() == trained)
        assert "its ES updates replayed from their rewards" in capsys.readouterr().out
    logged = (es / "metrics.jsonl").read_text()  # a run made before ES logged its members' rewards:
    (es / "metrics.jsonl").write_text("".join(
        json.dumps({k: v for k, v in json.loads(line).items() if k != "member_rewards"}) + "\n"
        for line in logged.splitlines()))
    shutil.rmtree(es / "stage1-es")
    assert (training.weights_again(es)
            and (es / "stage1-es" / "model.safetensors").read_bytes() == trained)
    assert "training it again, unevaluated" in capsys.readouterr().out
    # the rewards kept, as they were: it replays from now on
    assert (es / "metrics.jsonl").read_text() == logged


def test_reproduce_decodes_as_its_runs_did_and_reads_the_dtype_where_older_runs_kept_it(tmp_path):
    """A run that decoded a bfloat16 copy (scale.train --rollout-dtype bfloat16): its settings
    evaluate the model to the run's own base evaluation, and float32 decoding would not. A run made
    when the flag was the launcher's (config.json's "scale") is read the same, reused only by a
    reproduction that decodes so."""
    from conftest import TINY_RUN, run_scale, summary_of
    from analyses.evaluation import evaluate_model, evaluation_args, load
    from scale.config import parse_args
    out, flags = tmp_path / "bf16", [*TINY_RUN, "--algo", "es", "--steps", "1", "--rollout-dtype",
                                     "bfloat16"]
    assert run_scale(*flags, "--out", str(out)).returncode == 0
    base = summary_of(out)[0]
    config = json.loads((out / "config.json").read_text())
    # as the launcher's flags were saved, before one settings object held them
    launcher = ("rollout_dtype", "resume", "save_every", "rollout", "es_batched")
    config["scale"] = {name: config.pop(name) for name in launcher}
    (out / "config.json").write_text(json.dumps(config))
    settings = evaluation_args(training.run_settings(out))
    assert settings.rollout_dtype == "bfloat16"
    measured = evaluate_model(*load("tiny", settings), settings)
    assert ([measured[key] for key in ("correct", "entropy_sums")]
            == [base[key] for key in ("correct", "entropy_sums")])
    in_float32 = evaluate_model(*load("tiny", settings),
                                dataclasses.replace(settings, rollout_dtype="model"))
    assert in_float32["entropy_sums"] != base["entropy_sums"]
    assert training.setting_changed(out, parse_args(flags)) == ""
    assert (training.setting_changed(out, parse_args(flags[:-2]))
            == "--rollout-dtype 'bfloat16' (this one: 'model')")
    assert training.setting_changed(tmp_path / "none", parse_args(flags)) is None


def test_a_model_built_by_other_pretrain_flags_is_rebuilt_and_its_runs_removed(tmp_path):
    model, runs = tmp_path / "models" / "small", tmp_path / "runs" / "size-small"
    flags = ["--hidden-size", "16", "--intermediate-size", "32", "--layers", "1", "--heads", "2",
             "--steps", "1", "--batch", "2"]
    training.pretrained(model, flags, "a test model", [runs])
    built = (model / "pretrain.json").stat().st_mtime_ns
    runs.mkdir(parents=True)
    # the same recipe: kept, and its runs too
    training.pretrained(model, flags, "a test model", [runs])
    assert (model / "pretrain.json").stat().st_mtime_ns == built and runs.exists()
    # another recipe: built again
    training.pretrained(model, [*flags, "--lr", "1e-3"], "a test model", [runs])
    assert json.loads((model / "pretrain.json").read_text())["lr"] == 1e-3 and not runs.exists()


def test_grpo_is_trained_again_to_the_update_where_its_path_reaches_es_pass1(tmp_path):
    """...taking the base model's evaluation from the seed's GRPO run (a planted value comes
    through)."""
    from conftest import TINY_RUN
    flags = TINY_RUN[2:]  # without its --steps; 2 prompts x 2 samples: 4 sequences per update
    assert TINY_RUN[0] == "--steps" and "--steps" not in flags
    lender = tmp_path / "grpo-s0"
    measured = training.train_run(lender, [*flags, "--algo", "grpo", "--steps", "1"])["stages"][0]
    summary = json.loads((lender / "summary.json").read_text())
    summary["stages"][0]["pass@1"] = 0.123
    (lender / "summary.json").write_text(json.dumps(summary))
    # 5 sequences: reached during update 2
    matched = training.grpo_at_gain(tmp_path, flags, [0], reach=5.0)
    assert (matched["updates"] == 2
            and matched["models"] == [str(tmp_path / "grpo-matched-s0" / "stage1-grpo")])
    summary = json.loads((tmp_path / "grpo-matched-s0" / "summary.json").read_text())
    assert summary["algo"] == "grpo" and summary["stages"][-1]["sequences"] == 8
    assert matched["finals"] == [summary["stages"][-1]]
    assert summary["stages"][0] == {**measured, "pass@1": 0.123}
    # ES's Pass@1 changed: 1 update, replaced
    again = training.grpo_at_gain(tmp_path, flags, [0], reach=1.0)
    assert again["updates"] == 1 and again["finals"][0]["sequences"] == 4
    # a setting the user gives, not the reach: refused, as train_run refuses
    with pytest.raises(SystemExit):
        training.grpo_at_gain(tmp_path, [*flags, "--grpo-lr", "3e-5"], [0], reach=1.0)
    with pytest.raises(SystemExit):  # the same, with other updates too: refused, not replaced
        training.grpo_at_gain(tmp_path, [*flags, "--grpo-lr", "3e-5"], [0], reach=5.0)
    assert training.grpo_at_gain(tmp_path / "never", flags, [0], reach=float("nan")) == {
        "updates": 0, "models": [], "finals": []}
    assert not (tmp_path / "never").exists()


@versioned(1)
def measured(base: str, model: str, samples: int) -> dict:
    """A stand-in analysis whose numbers depend on its arguments (tests of reuse)."""
    measured_calls.append((base, model, samples))
    return {"pass@1": 0.25, "correct": [1, samples]}


measured_calls = []


def finished_run(folder, seed: int = 0):
    """A run folder as a report commits it: settings and summary, no weights."""
    (folder / "stage1-es").mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"seed": seed, "out": str(folder)}))
    (folder / "summary.json").write_text(json.dumps({"stages": [{"pass@1": 0.1, "seconds": 3.0}]}))
    return str(folder / "stage1-es")


def test_an_analysis_is_reused_only_while_its_arguments_and_models_runs_are_the_same(
        tmp_path, monkeypatch):
    trained_again = []
    monkeypatch.setattr(reuse, "weights_again", lambda run: trained_again.append(run) or True)
    model, store = finished_run(tmp_path / "runs" / "es-s0"), reuse.Store(tmp_path / "reused")
    measured_calls.clear()
    first = store.get("sparsity", ["tiny", model], measured, "tiny", model, 16)
    # no weights here: trained again before measuring
    assert trained_again == [tmp_path / "runs" / "es-s0"]
    assert "this invocation" in store.made["sparsity"]
    assert store.get("sparsity", ["tiny", model], measured, "tiny", model,
                     16) == first and len(measured_calls) == 1
    summary = tmp_path / "runs" / "es-s0" / "summary.json"
    # the same training, timed again: reused
    summary.write_text(summary.read_text().replace("3.0", "4.5"))
    assert reuse.Store(tmp_path / "reused").get("sparsity", ["tiny", model], measured, "tiny",
                                                model, 16) == first
    assert len(measured_calls) == 1
    # another training: measured again
    summary.write_text(summary.read_text().replace("0.1", "0.2"))
    store.get("sparsity", ["tiny", model], measured, "tiny", model, 16)
    # other arguments: measured again
    store.get("sparsity", ["tiny", model], measured, "tiny", model, 32)
    assert len(measured_calls) == 3
    (tmp_path / "reused" / "sparsity.json").write_text("{not json")
    assert store.get("sparsity", ["tiny", model], measured, "tiny", model,
                     32) == {"pass@1": 0.25, "correct": [1, 32]}
    assert len(measured_calls) == 4
    moved = tmp_path / "elsewhere"  # the same runs under another --out: the same identities
    (tmp_path / "runs").rename(moved)
    again = reuse.Store(tmp_path / "reused")
    again.get("sparsity", ["tiny", str(moved / "es-s0" / "stage1-es")], measured, "tiny",
              str(moved / "es-s0" / "stage1-es"), 32)
    assert len(measured_calls) == 4 and "this invocation" not in again.made["sparsity"]


def test_a_stopped_analysis_keeps_the_pieces_it_finished(tmp_path, finished_run):
    """forgetting_control saves a piece a model, diversity_analysis a piece a sigma, through
    reproduce's Store: stopped in its last piece, an analysis measures only that piece again, and
    its pieces compose what it measures in one go."""
    folder, _ = finished_run
    es, grpo = str(folder / "stage2-es"), str(folder / "stage1-grpo")
    args = Args(eval_samples=4, eval_problems=2, heldout_problems=2, max_new_tokens=8,
                eval_temperature=1.0)
    population = diversity.Population(2, [1e-3, 3e-3], 2)
    stop = {"forgetting-grpo-0", "diversity-sigma0.003"}

    # Store.get, stopped (as by Ctrl-C) where a piece named in `stop` begins
    def store_stopping(store):
        def get(name, models, function, *arguments):
            if name in stop:
                raise KeyboardInterrupt(name)
            return store.get(name, models, function, *arguments)
        return get
    for analysis in (
            lambda measure: forgetting.forgetting_control("tiny", [es], [grpo], args, 2, measure),
            lambda measure: diversity.diversity_analysis("tiny", population, args, measure)):
        with pytest.raises(KeyboardInterrupt):
            analysis(store_stopping(reuse.Store(tmp_path / "reused")))
    assert sorted(path.stem for path in (tmp_path / "reused").iterdir()) == [
        "diversity-sigma0.001", "forgetting-base", "forgetting-es-0", "forgetting-noise-0"]
    stop.clear()
    store = reuse.Store(tmp_path / "reused")
    kept = [analysis(store_stopping(store)) for analysis in (
        lambda measure: forgetting.forgetting_control("tiny", [es], [grpo], args, 2, measure),
        lambda measure: diversity.diversity_analysis("tiny", population, args, measure))]
    measured_again = [name for name, made in store.made.items() if "this invocation" in made]
    assert measured_again == ["forgetting-grpo-0", "diversity-sigma0.003"]
    whole = [forgetting.forgetting_control("tiny", [es], [grpo], args, 2),
             diversity.diversity_analysis("tiny", population, args)]
    assert kept[0]["families"] and kept[0]["grpo"][0]  # held-out counts were measured
    assert json.dumps(kept, default=float) == json.dumps(whole, default=float)  # NaN reads as NaN


def test_a_bumped_version_measures_again_and_saved_only_names_it(tmp_path, monkeypatch):
    """The key is the function's version, not its code: the same version reuses what was saved; a
    bump measures again, and with --saved-only is refused in one line naming the version; a
    function without a version is never saved."""
    monkeypatch.setattr(reuse, "weights_again", lambda run: True)
    model = finished_run(tmp_path / "runs" / "es-s0")
    measured_calls.clear()
    reuse.Store(tmp_path / "reused").get("drift", [model], measured, "tiny", model, 8)
    assert reuse.Store(tmp_path / "reused").get("drift", [model], measured, "tiny", model, 8)
    assert len(measured_calls) == 1
    monkeypatch.setattr(measured, "version", 2)
    with pytest.raises(SystemExit) as refused:
        reuse.Store(tmp_path / "reused", saved_only=True).get("drift", [model], measured, "tiny",
                                                               model, 8)
    assert refused.value.code == 2 and "differs in: version" in refused.value.message
    reuse.Store(tmp_path / "reused").get("drift", [model], measured, "tiny", model, 8)
    assert len(measured_calls) == 2
    with pytest.raises(TypeError, match="carries its version"):
        reuse.Store(tmp_path / "reused").get("drift", [model], lambda: {})
