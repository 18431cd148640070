import json

import pytest

import es_grpo
from conftest import SMALL_RUN, countdown_file, run_es_grpo, run_scale, summary_of
from scale.config import load_problems
from tiny_model.tasks import problem_key


def write(path, lines):
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_loads_countdown_and_math_files_recognising_the_task(tmp_path):
    countdown = write(tmp_path / "c.jsonl", [json.dumps({"numbers": [3, 5, 7], "target": 56}), ""])
    math = write(tmp_path / "m.jsonl", [json.dumps({"question": "1+1?", "answer": "so #### 2"})])
    assert load_problems(countdown) == [{"task": "countdown", "numbers": [3, 5, 7], "target": 56}]
    assert load_problems(math)[0]["task"] == "math"


@pytest.mark.parametrize("lines, message", [
    (['{"numbers": [1, 2], "target": 3}', "{oops"], "bad.jsonl:2: not valid JSON"),
    (['{"numbers": [1, "2"], "target": 3}'], "bad.jsonl:1: countdown needs"),
    (['{"question": "x"}'], "bad.jsonl:1: math needs"),
    ([""], "bad.jsonl: no problems"),
])
def test_bad_data_files_get_one_line_errors_naming_file_and_line(tmp_path, lines, message):
    with pytest.raises(SystemExit) as error:
        load_problems(write(tmp_path / "bad.jsonl", lines))
    assert message in str(error.value) and "\n" not in str(error.value)


def test_missing_model_folder_or_not_a_model(tmp_path):
    with pytest.raises(SystemExit, match="no config.json"):
        es_grpo.load_model(str(tmp_path))


def test_builtin_training_problems_never_include_evaluation_problems():
    args = es_grpo.Args()
    tokenizer = type("T", (), {"chat_template": None})()
    train, evaluation, heldout = es_grpo.evaluation_sets(args, tokenizer)
    keys = {problem_key(p) for p in train}
    assert not keys & {problem_key(p) for p in evaluation}
    assert set(heldout) == {"add", "sort"} and len(evaluation) == args.eval_problems


def test_model_path_that_does_not_exist_or_is_not_a_causal_lm(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(SystemExit, match="no such folder"):  # a path, not a hub id: said as such
        es_grpo.load_model("/no/such/model")
    with pytest.raises(SystemExit, match="cannot load a causal LM"):  # a hub id, offline
        es_grpo.load_model("no-such-org/no-such-model")
    (tmp_path / "config.json").write_text('{"model_type": "vit"}')
    with pytest.raises(SystemExit, match="cannot load a causal LM"):
        es_grpo.load_model(str(tmp_path))


def test_tokenizer_without_pad_token_is_handled(tmp_path):
    import shutil

    from transformers import AutoTokenizer
    folder = tmp_path / "nopad"
    shutil.copytree(es_grpo.TINY_MODEL, folder)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (folder / name).unlink()
    tokenizer = AutoTokenizer.from_pretrained(es_grpo.TINY_MODEL)
    tokenizer.pad_token = None
    tokenizer.save_pretrained(folder)
    assert AutoTokenizer.from_pretrained(folder).pad_token is None  # the case under test
    model, tokenizer = es_grpo.load_model(str(folder))
    assert tokenizer.pad_token_id == tokenizer.eos_token_id
    roll = es_grpo.rollout(model, tokenizer, ["C3,5,7=56:", "A12+30:"],
                           es_grpo.Sampling(max_new_tokens=4))
    assert len(roll.texts) == 2


def test_bad_data_or_model_exits_2_with_one_line_leaves_nothing_and_the_retry_just_works(tmp_path):
    data, out = tmp_path / "train.jsonl", tmp_path / "run"
    data.write_text('{"numbers": [1, 2, 3], "target": 6}\n{oops\n')
    for command, flags, message in [
            # data files: scale.train's
            (run_scale, ["--data", str(data)], f"{data}:2: not valid JSON"),
            (run_scale, ["--data", str(tmp_path / "nowhere.jsonl")], "nowhere.jsonl: cannot read"),
            (run_es_grpo, ["--model", str(tmp_path / "typo")], "typo: no such folder"),
            (run_scale, ["--model", str(tmp_path)], "has no config.json")]:
        refused = command(*SMALL_RUN, "--algo", "es", *flags, "--out", str(out))
        said = refused.stderr.splitlines()
        assert refused.returncode == 2 and len(said) == 1 and said[0].startswith("error: ")
        assert message in refused.stderr and "Traceback" not in refused.stderr
        assert not out.exists()  # nothing written: the same command works once the input is fixed
    countdown_file(data, 12)
    fixed = run_scale(*SMALL_RUN, "--algo", "es", "--data", str(data), "--out", str(out))
    assert fixed.returncode == 0, fixed.stderr[-2000:]
    assert "Loading weights" not in fixed.stdout + fixed.stderr  # transformers' bars are silenced
    assert (out / "summary.json").exists()


def test_eval_data_and_task_choose_the_problems(tmp_path):
    train, evaluation = countdown_file(tmp_path / "train.jsonl",
                                       10), countdown_file(tmp_path / "eval.jsonl", 3, 50)
    out = tmp_path / "run"
    result = run_scale(*SMALL_RUN, "--algo", "es", "--steps", "1", "--eval-problems", "5",
                       "--data", str(train),
                         "--eval-data", str(evaluation), "--task", "countdown", "--out", str(out))
    assert result.returncode == 0, result.stderr[-2000:]
    # all of --data trains; --eval-data evaluates
    assert "10 training / 3 eval problems" in result.stdout
    assert len(summary_of(out)[0]["correct"]) == 3
    as_math = run_scale(*SMALL_RUN, "--data", str(train), "--task", "math", "--out",
                        str(tmp_path / "never"))
    assert as_math.returncode == 2 and "train.jsonl:1: math needs 'question'" in as_math.stderr
