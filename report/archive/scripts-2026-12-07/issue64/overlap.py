# One ES member decoded (16 prompts, greedy, <= 48 tokens, bfloat16, sigma 0.01): its eps drawn
# alone, then on a background thread while the member decodes (2 threads, then 1). Run alone.
import sys, time, dataclasses, statistics, threading, torch

sys.path.insert(0, ".")  # run from the repository root
import es_grpo
from scale.bench.real import real_setup
from scale.assembly import ScaleArgs, context
from scale.es_noise import draw_all

torch.set_num_threads(2)
model, tok, args, problems = real_setup("bfloat16")
es_args = dataclasses.replace(
    args, es_population=16, es_prompts=16, max_new_tokens=48, es_sigma=0.01
)
run = context(es_args, model, tok, ScaleArgs(rollout="hf"))
prompts = [es_grpo.prompt_text(p, tok) for p in problems[:16]]
s = es_args.sampling("es", 0)
params = list(model.parameters())
master = es_grpo.master_weights(params)
eps = draw_all(es_grpo.noise, 1, params)
with torch.no_grad():
    for p, m, e in zip(params, master, eps):
        p.copy_(m + 0.01 * e)


def member():
    with torch.no_grad():
        for p in params:
            p.add_(0)
    t = time.perf_counter()
    run.generate(model, tok, prompts, s)
    return time.perf_counter() - t


def noise(workers):
    t = time.perf_counter()
    draw_all(es_grpo.noise, 7, params, workers)
    return time.perf_counter() - t


print(
    "alone: decode",
    [round(member(), 2) for _ in range(3)],
    "noise 2 thr",
    [round(noise(0), 2) for _ in range(2)],
    "noise 1 thr",
    round(noise(1), 2),
)
for rep in range(3):
    out = {}
    th = threading.Thread(target=lambda: out.__setitem__("n", noise(1)))
    t = time.perf_counter()
    th.start()
    d = member()
    th.join()
    w = time.perf_counter() - t
    print(f"overlapped: decode {d:.2f}, noise {out['n']:.2f}, wall {w:.2f}")
torch.set_num_threads(1)
print("1 thread alone: decode", [round(member(), 2) for _ in range(2)])
for rep in range(2):
    out = {}
    th = threading.Thread(target=lambda: out.__setitem__("n", noise(1)))
    t = time.perf_counter()
    th.start()
    d = member()
    th.join()
    w = time.perf_counter() - t
    print(f"1-thread decode overlapped: decode {d:.2f}, noise {out['n']:.2f}, wall {w:.2f}")
