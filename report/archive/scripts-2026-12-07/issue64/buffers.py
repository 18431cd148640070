# One ES update (N=16 x 16) alternated: eps and sigma * eps in new memory each member, against
# the same buffers reused; the masters compared. Run alone: python buffers.py 2
import sys, time, dataclasses, statistics, torch

sys.path.insert(0, ".")  # run from the repository root
import es_grpo
import scale.es_noise as N
from scale.bench.real import real_setup
from scale.assembly import ScaleArgs, context
from concurrent.futures import ThreadPoolExecutor

torch.set_num_threads(2)
model, tok, args, problems = real_setup("bfloat16")
es_args = dataclasses.replace(args, es_population=16, es_prompts=16, max_new_tokens=48)
params = list(model.parameters())
orig_draw, orig_perturb = N.draw_all, N.perturb
BUF, SCR = {}, {}


def draw_buf(source, seed, params, workers=0):
    def one(i):
        out = BUF.get(i)
        if out is None:
            out = BUF[i] = torch.empty(params[i].shape)
        g = torch.Generator().manual_seed(abs(seed) * 1_000_003 + i)
        out.normal_(generator=g)
        return out.neg_() if seed < 0 else out

    with ThreadPoolExecutor(workers or N.threads()) as pool:
        return list(pool.map(one, range(len(params))))


def perturb_buf(params, master, eps, sigma, workers=0):
    def one(i):
        s = SCR.get(i)
        if s is None:
            s = SCR[i] = torch.empty(params[i].shape)
        with torch.no_grad():
            params[i].copy_(torch.mul(eps[i], sigma, out=s).add_(master[i]))

    with ThreadPoolExecutor(workers or N.threads()) as pool:
        list(pool.map(one, range(len(params))))


runs = {}
for name in ("fresh", "buffers"):
    run = context(es_args, model, tok, ScaleArgs(rollout="hf", es_noise="once"))
    runs[name] = (run, es_grpo.ESState(params, es_grpo.master_weights(params)))
res = {n: [] for n in runs}
masters = {}
for rep in range(int(sys.argv[1])):
    for name, (run, state) in runs.items():
        N.draw_all, N.perturb = (
            (draw_buf, perturb_buf) if name == "buffers" else (orig_draw, orig_perturb)
        )
        run.score_members.once.seconds.clear()
        t = time.perf_counter()
        es_grpo.es_step(run, state, problems[:16], rep)
        dt = time.perf_counter() - t
        res[name].append(dt)
        masters[name] = [m.clone() for m in state.master]
        print(
            name,
            f"{dt:.1f}",
            {k: round(v, 2) for k, v in run.score_members.once.seconds.items()},
            flush=True,
        )
    print(
        "same masters", all(torch.equal(a, b) for a, b in zip(masters["fresh"], masters["buffers"]))
    )
