# Single-token attention of SmolLM2-135M at 16 rows, ways of computing it (argv: threads).
import torch, time
import torch.nn.functional as F
import sys

torch.set_num_threads(int(sys.argv[1]))
R, Hkv, G, D = 16, 3, 3, 64


def med(f, n=500):
    f()
    t = time.perf_counter()
    for _ in range(n):
        f()
    return (time.perf_counter() - t) / n * 1e6


for L in (60, 100):
    buf = torch.randn(R, Hkv, 200, D).bfloat16()
    vbuf = torch.randn(R, Hkv, 200, D).bfloat16()
    keys, values = buf[:, :, :L], vbuf[:, :, :L]
    q = torch.randn(R, Hkv * G, 1, D).bfloat16()
    keep = torch.ones(R, 1, 1, L, dtype=torch.bool)
    keep[:3, ..., :5] = False
    s = D**-0.5

    def cur():  # decode_attention as in scale/decode.py
        gq = q.view(R, Hkv, G, D)
        sc = torch.matmul(gq, keys.transpose(-1, -2)).float() * s
        sc = sc.masked_fill(~keep, float("-inf"))
        return torch.matmul(sc.softmax(-1).to(values.dtype), values)

    def bmm():
        P = R * Hkv
        sc = torch.bmm(q.view(P, G, D), keys.reshape(P, L, D).transpose(1, 2))
        sc = (sc.float() * s).view(R, Hkv, G, L).masked_fill(~keep, float("-inf"))
        return torch.bmm(sc.softmax(-1).to(values.dtype).view(P, G, L), values.reshape(P, L, D))

    def f32():
        P = R * Hkv
        sc = torch.bmm(q.view(P, G, D).float(), keys.reshape(P, L, D).float().transpose(1, 2))
        sc = (
            (sc.to(torch.bfloat16).float() * s).view(R, Hkv, G, L).masked_fill(~keep, float("-inf"))
        )
        w = sc.softmax(-1).to(torch.bfloat16).float()
        return torch.bmm(w.view(P, G, L), values.reshape(P, L, D).float()).to(torch.bfloat16)

    def sdpa():
        return F.scaled_dot_product_attention(
            q, keys, values, attn_mask=keep, scale=s, enable_gqa=True
        )

    def ew():  # elementwise fp32
        kf = keys.float()
        vf = values.float()
        sc = (q.view(R, Hkv, G, 1, D).float() * kf[:, :, None]).sum(-1)
        sc = (sc.to(torch.bfloat16).float() * s).masked_fill(~keep, float("-inf"))
        w = sc.softmax(-1).to(torch.bfloat16).float()
        return (w[..., None] * vf[:, :, None]).sum(-2).to(torch.bfloat16)

    ref = cur()
    for f in (cur, bmm, f32, sdpa, ew):
        out = f().reshape(R, Hkv, G, D)
        print(
            L,
            f.__name__,
            f"{med(f):.0f} us",
            "max diff vs cur",
            (out.float() - ref.reshape(R, Hkv, G, D).float()).abs().max().item(),
        )
