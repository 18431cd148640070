# A member decode (sigma 0.01, 16 prompts, greedy, <= 48): FastRollout with and without
# scale/decode_step.py, alternated (argv: rounds). Run alone.
import sys, time, dataclasses, statistics, torch

sys.path.insert(0, ".")  # run from the repository root
import es_grpo
from scale.bench.real import real_setup
from scale.decode import FastRollout

torch.set_num_threads(2)
model, tok, args, problems = real_setup("bfloat16")
prompts = [es_grpo.prompt_text(p, tok) for p in problems[:16]]
s = dataclasses.replace(args, max_new_tokens=48).sampling("es", 0)
params = list(model.parameters())
master = es_grpo.master_weights(params)
es_grpo.set_weights(params, master, 1, 0.01)
fast = {"step": FastRollout(), "forward": FastRollout(stepped=False)}
times = {k: [] for k in fast}
for i in range(int(sys.argv[1])):
    for name, f in fast.items():
        with torch.no_grad():
            for p in params:
                p.add_(0)
        t = time.perf_counter()
        r = f(model, tok, prompts, s)
        times[name].append(time.perf_counter() - t)
print(
    {k: [round(x, 2) for x in v] for k, v in times.items()},
    "median",
    {k: round(statistics.median(v), 3) for k, v in times.items()},
)
