# A decode step at 16 rows timed and profiled, against its products alone.
import sys, time, dataclasses, statistics, functools, torch

sys.path.insert(0, ".")  # run from the repository root
import es_grpo
import scale.decode as D
import scale.decode_step as S
from scale.bench.real import real_setup
from scale.assembly import ScaleArgs, context

torch.set_num_threads(2)
model, tok, args, problems = real_setup("bfloat16")
es_args = dataclasses.replace(args, es_population=16, es_prompts=16, max_new_tokens=48)
run = context(es_args, model, tok, ScaleArgs(rollout="hf"))
prompts = [es_grpo.prompt_text(p, tok) for p in problems[:16]]
s = dataclasses.replace(es_args.sampling("es", 0), max_new_tokens=12)
# capture a decoder mid-rollout
grab = {}
orig = S.step


def spy(model, inputs, mask, positions, cache, joined=None):
    grab.update(
        model=model, inputs=inputs, mask=mask, positions=positions, cache=cache, joined=joined
    )
    return orig(model, inputs, mask, positions, cache, joined)


S.step = spy
fr = run.generate
packs = None
# run inside the packs context by calling generate and timing steps inside spy on the 6th call
calls = {"n": 0}


def spy2(model, inputs, mask, positions, cache, joined=None):
    calls["n"] += 1
    if calls["n"] == 6:
        for layer in cache.layers:
            layer.room_filled = layer.filled

        def once(lin_stub):
            for layer in cache.layers:
                layer.filled = layer.room_filled
            return orig(model, inputs, mask, positions, cache, joined)

        ts = []
        for _ in range(20):
            t = time.perf_counter()
            once(None)
            ts.append(time.perf_counter() - t)
        print(f"lean step, 16 rows: {statistics.median(ts) * 1e3:.1f} ms")
        from torch.profiler import profile, ProfilerActivity

        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(10):
                once(None)
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25))
        # linears alone: every packed product of the step
        lin = []
        body = model.model
        h = torch.randn(inputs.shape[0], 576).bfloat16()
        h2 = torch.randn(inputs.shape[0], 1536).bfloat16()
        for layer in body.layers:
            a, m = layer.self_attn, layer.mlp
            lin += [
                (joined(a, S.QKV), h),
                (a.o_proj.forward, h),
                (joined(m, S.GATE_UP), h),
                (m.down_proj.forward, h2),
            ]
        lin.append((model.lm_head.forward, h))
        ts = []
        for _ in range(20):
            t = time.perf_counter()
            for f, x in lin:
                f(x)
            ts.append(time.perf_counter() - t)
        print(f"its linears alone: {statistics.median(ts) * 1e3:.1f} ms; lm_head", end=" ")
        ts = []
        for _ in range(20):
            t = time.perf_counter()
            model.lm_head.forward(h)
            ts.append(time.perf_counter() - t)
        print(f"{statistics.median(ts) * 1e3:.1f} ms")
        for layer in cache.layers:
            layer.filled = layer.room_filled
    return orig(model, inputs, mask, positions, cache, joined)


S.step = spy2
run.generate(model, tok, prompts, s)
