# The layers' products of SmolLM2-135M's shapes at 16 rows, bfloat16, 2 threads: oneDNN packed
# (for 16 rows and for 1), plain F.linear, mm on transposed weights, float32; and one read of every
# weight. Then two models' products one after another on 2 threads, on 1 thread, and at once on
# two Python threads of 1 thread each. Run alone: python kernels.py
import threading, time, statistics, torch

torch.set_num_threads(2)
shapes = [
    (576, 576),
    (192, 576),
    (192, 576),
    (576, 576),
    (1536, 576),
    (1536, 576),
    (576, 1536),
] * 30
W = [torch.randn(*s).bfloat16() for s in shapes]
x = {576: torch.randn(16, 576).bfloat16(), 1536: torch.randn(16, 1536).bfloat16()}
P16 = [torch.ops.mkldnn._reorder_linear_weight(w, 16) for w in W]
P1 = [torch.ops.mkldnn._reorder_linear_weight(w, 1) for w in W]
Wt = [w.t().contiguous() for w in W]
Wf = [w.float() for w in W]
xf = {k: v.float() for k, v in x.items()}


def med(f, n=9):
    ts = []
    for _ in range(n):
        t = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts) * 1e3


mb = sum(w.numel() for w in W) * 2 / 1e6
lin = lambda p, w: torch.ops.mkldnn._linear_pointwise(x[w.shape[1]], p, None, "none", [None], "")
tests = {
    "packed16": lambda: [lin(p, w) for w, p in zip(W, P16)],
    "packed1": lambda: [lin(p, w) for w, p in zip(W, P1)],
    "F.linear bf16": lambda: [torch.nn.functional.linear(x[w.shape[1]], w) for w in W],
    "mm bf16 (w^T contiguous)": lambda: [torch.mm(x[w.shape[1]], wt) for w, wt in zip(W, Wt)],
    "F.linear fp32": lambda: [torch.nn.functional.linear(xf[w.shape[1]], w) for w in Wf],
    "read bf16": lambda: [w.sum() for w in W],
}
for k, f in tests.items():
    t = med(f)
    print(f"{k}: {t:.1f} ms ({mb / t:.1f} GB/s of bf16 weights)")
# two members' products
W2 = [torch.randn(1536, 576).bfloat16() for _ in range(300)]
packs = [[torch.ops.mkldnn._reorder_linear_weight(a, 16) for a in W2[k::2]] for k in (0, 1)]


def run(k):
    for p in packs[k]:
        torch.ops.mkldnn._linear_pointwise(x[576], p, None, "none", [None], "")


print("two models one after another, 2 threads", med(lambda: (run(0), run(1))))
torch.set_num_threads(1)
print("two models one after another, 1 thread", med(lambda: (run(0), run(1))))


def both():
    ts = [threading.Thread(target=run, args=(k,)) for k in (0, 1)]
    [t.start() for t in ts]
    [t.join() for t in ts]


print("two models at once, a Python thread of 1 thread each", med(both))
