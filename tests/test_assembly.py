"""scale/assembly.py, the one place that builds a run's hooks: every caller gets the same hooks for
the same settings (python -m scale.train, eval.py's runs and measurements), and its settings choose
them."""
import inspect

import es_grpo
from scale import assembly, es, train
from scale.config import Args


def described(hooks: dict) -> dict:
    """What decides how a run decodes, scores, steps, reads its problems and grades: each hook's
    kind and its settings (a decoder's dtype, the population's mode), comparable across callers."""
    def kind(hook):
        if inspect.isfunction(hook):
            return f"{hook.__module__}.{hook.__qualname__}"
        return type(hook).__name__, getattr(hook, "dtype", None), getattr(hook, "batched", None)
    names = ("generate", "score_members", "grpo_step", "problems", "grade")
    return {name: kind(hooks[name]) for name in names}


def test_every_caller_gets_the_same_hooks_for_the_same_settings(monkeypatch, tmp_path):
    """scale.train's run, a run that eval.py's reproduce trains (analyses/training.py) and the
    context an analysis measures with (analyses/evaluation.py) decode, score members, step, read
    problems and grade alike at the same settings; es_grpo.py alone keeps its own defaults."""
    from analyses import evaluation, training
    given = {}
    monkeypatch.setattr(es_grpo, "run", lambda args, **hooks: given.setdefault(len(given), hooks))
    flags = ["--rollout-dtype", "float32", "--steps", "2"]
    train.main([*flags, "--out", str(tmp_path / "train")])
    training.train_run(tmp_path / "reproduce", flags)
    args = train.parse_args(flags)
    measured = evaluation.context(args, None, None)
    assert described(given[0]) == described(given[1]) == described(vars(measured))
    assert described(vars(measured)) == {
        "generate": ("FastRollout", "float32", None),
        "score_members": ("PopulationScorer", None, "auto"),
        "grpo_step": "scale.grpo.grpo_step", "problems": "scale.config.evaluation_sets",
        "grade": "scale.verifier.grade"}
    alone = es_grpo.Context(Args(), None, None)
    assert described(vars(alone)) == {
        "generate": "es_grpo.rollout", "score_members": "es_grpo.score_members",
        "grpo_step": "es_grpo.grpo_step", "problems": "es_grpo.evaluation_sets",
        "grade": "es_grpo.grade"}


def test_the_settings_choose_the_hooks():
    """--rollout plain is es_grpo.rollout as written; --es-batched reaches the population's scorer;
    --resume and --save-every reach the folder; vllm needs a started engine, whose weights ES then
    sets."""
    plain = assembly.hooks(Args(rollout="plain", es_batched="off", resume="runs/x", save_every=3))
    assert plain["generate"] is es_grpo.rollout and plain["score_members"].batched == "off"
    assert (plain["folder"].resume, plain["folder"].save_every) == ("runs/x", 3)
    once, redrawn, table = (assembly.hooks(Args(es_noise=noise))
                            for noise in ("once", "redrawn", "table"))
    assert once["es_update"].source is once["score_members"].source is es.PER_TENSOR
    assert once["score_members"].reuse and not redrawn["score_members"].reuse
    assert isinstance(table["es_update"].source, es.NoiseTable)
    assert table["es_update"].source is table["score_members"].source

    class Engine:
        def es_weights(self, model):
            return []
    engine = Engine()
    made = assembly.hooks(Args(rollout="vllm"), engine)
    assert made["generate"] is engine and made["es_weights"] == engine.es_weights
    try:
        assembly.hooks(Args(rollout="vllm"))
        raise AssertionError("an engine was needed")
    except ValueError as refusal:
        assert "started engine" in str(refusal)
