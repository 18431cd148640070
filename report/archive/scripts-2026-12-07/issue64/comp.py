# torch.compile of scale/decode_step.py step, the packed products left out of the graph.
import sys, time, dataclasses, statistics, functools, torch

sys.path.insert(0, ".")  # run from the repository root
import es_grpo
import scale.decode_step as S
from scale.bench.real import real_setup
from scale.assembly import ScaleArgs, context

torch.set_num_threads(2)
model, tok, args, problems = real_setup("bfloat16")
es_args = dataclasses.replace(args, es_population=16, es_prompts=16, max_new_tokens=48)
run = context(es_args, model, tok, ScaleArgs(rollout="hf"))
prompts = [es_grpo.prompt_text(p, tok) for p in problems[:16]]
s = es_args.sampling("es", 0)
params = list(model.parameters())
master = es_grpo.master_weights(params)
es_grpo.set_weights(params, master, 1, 0.01)
import scale.decode as D

D.packed_linear = torch.compiler.disable(D.packed_linear)
plain = S.step
compiled = torch.compile(S.step, dynamic=True)


def timed(name):
    S.step = compiled if name == "compiled" else plain
    t = time.perf_counter()
    r = run.generate(model, tok, prompts, s)
    return time.perf_counter() - t, r


t0 = time.perf_counter()
try:
    dt, r = timed("compiled")
    print(f"first compiled rollout {dt:.1f} s")
except Exception as e:
    print("compile failed:", repr(e)[:2000])
    raise SystemExit
for i in range(3):
    for name in ("plain", "compiled"):
        dt, r = timed(name)
        print(name, f"{dt:.3f}", r.completion_ids.shape)
