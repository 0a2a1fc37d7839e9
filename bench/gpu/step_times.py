#!/usr/bin/env python3
"""Time the forward steps of a dense Llama-shaped decoder on one GPU, to check the engine's cost model.

The cost model (engine/include/disagg/cost_model.h) predicts a step as a roofline with two stated
efficiency factors: the fraction of peak FLOP/s a prefill reaches (efficiency.compute) and the fraction
of HBM bandwidth a decode step reaches (efficiency.memory). This script measures both on real hardware
with random weights (no download: the shapes are what matter): one prefill of T tokens, and one decode
step of B sequences holding C tokens of context each, both replayed from CUDA graphs so that kernel
launches cost what they cost in a serving engine that captures graphs (vLLM does), and timed with CUDA
events. It prints one JSON object; bench/gpu/compare.mjs sets it against `disagg-engine cost`.

The kernels are PyTorch's (cuBLAS GEMMs, scaled_dot_product_attention). vLLM uses the same cuBLAS GEMMs
and FlashAttention, and adds its own scheduler time per step (the model's stepOverheadSeconds), which
this script does not measure.

Run on a CUDA machine:  python3 bench/gpu/step_times.py > step-times.json
Check on a CPU (tiny shapes, no graphs):  python3 bench/gpu/step_times.py --tiny
"""
import argparse
import json
import sys

import torch
import torch.nn.functional as F


def parse_ints(text):
    return [int(x) for x in text.split(',') if x]


def args_from_cli():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # Llama-3.1-8B (config.json): 32 layers, hidden 4096, 32 heads, 8 KV heads, head dim 128,
    # intermediate 14336, vocab 128256, untied embeddings.
    p.add_argument('--layers', type=int, default=32)
    p.add_argument('--hidden', type=int, default=4096)
    p.add_argument('--heads', type=int, default=32)
    p.add_argument('--kv-heads', type=int, default=8)
    p.add_argument('--head-dim', type=int, default=128)
    p.add_argument('--intermediate', type=int, default=14336)
    p.add_argument('--vocab', type=int, default=128256)
    p.add_argument('--prefill', type=parse_ints, default=parse_ints('256,1024,4096,8192,16384'),
                   help='prompt lengths of the single-sequence prefills')
    p.add_argument('--decode', default='1x1024,8x1024,32x1024,64x1024,128x1024,256x1024,32x4096,64x4096',
                   help='decode steps as BATCHxCONTEXT, comma separated')
    p.add_argument('--reps', type=int, default=20, help='timed replays of each step (after 3 warm-ups)')
    p.add_argument('--no-fuse', dest='fuse', action='store_false',
                   help="PyTorch's own elementwise kernels instead of torch.compile's fused ones")
    p.add_argument('--tiny', action='store_true', help='tiny shapes on the CPU: checks the script runs')
    a = p.parse_args()
    a.decode = [tuple(int(v) for v in item.split('x')) for item in a.decode.split(',') if item]
    if a.tiny:
        a.layers, a.hidden, a.heads, a.kv_heads, a.head_dim = 2, 64, 4, 2, 16
        a.intermediate, a.vocab, a.prefill, a.decode, a.reps = 128, 512, [8, 32], [(2, 16), (4, 32)], 2
    if a.heads % a.kv_heads:
        p.error(f'--heads {a.heads} is not a multiple of --kv-heads {a.kv_heads}: grouped-query '
                'attention shares each KV head among a whole number of query heads')
    return a


class Decoder:
    """Weights of a Llama-style decoder: fused QKV, fused gate/up, RMSNorm, rotary, untied head."""

    def __init__(self, a, device, dtype):
        def w(*shape):
            # Random, not zeros: a GPU computes zeros measurably faster (lower power).
            return torch.randn(*shape, device=device, dtype=dtype) * 0.02
        self.a = a
        qkv = (a.heads + 2 * a.kv_heads) * a.head_dim
        self.embed = w(a.vocab, a.hidden)
        self.layers = [dict(norm1=torch.ones(a.hidden, device=device, dtype=dtype),
                            wqkv=w(a.hidden, qkv), wo=w(a.heads * a.head_dim, a.hidden),
                            norm2=torch.ones(a.hidden, device=device, dtype=dtype),
                            wgu=w(a.hidden, 2 * a.intermediate), wdown=w(a.intermediate, a.hidden))
                       for _ in range(a.layers)]
        self.norm = torch.ones(a.hidden, device=device, dtype=dtype)
        self.head = w(a.hidden, a.vocab)
        self.weight_bytes = sum(t.numel() * t.element_size() for t in self.tensors())

    def tensors(self):
        yield self.embed
        yield self.norm
        yield self.head
        for layer in self.layers:
            yield from layer.values()


def rms_norm(x, weight):
    var = x.float().pow(2).mean(-1, keepdim=True)
    return (x.float() * torch.rsqrt(var + 1e-5)).to(x.dtype) * weight


def rotate(x, cos, sin):
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


def sdpa(q, k, v, causal):
    if hasattr(F, 'scaled_dot_product_attention'):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    # PyTorch before 2.0 (Debian 12's, for --tiny): the same arithmetic, unfused.
    scores = (q @ k.transpose(-1, -2)) / q.shape[-1] ** 0.5
    if causal:
        mask = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool, device=q.device).tril()
        scores = scores.masked_fill(~mask, float('-inf'))
    return scores.softmax(-1) @ v


def attention(q, k, v, causal, gqa):
    if gqa:
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
    group = q.shape[1] // k.shape[1]  # older PyTorch: repeat the KV heads instead
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    return sdpa(q, k, v, causal)


def add_rms_norm(x, delta, weight):
    """Residual add and the next RMSNorm, the pair vLLM runs as one kernel (fused_add_rms_norm)."""
    x = x + delta
    return x, rms_norm(x, weight)


def rope(q, k, cos, sin):
    return rotate(q, cos, sin), rotate(k, cos, sin)


def silu_mul(gate_up):
    gate, up = gate_up.chunk(2, dim=-1)
    return F.silu(gate) * up


class Kernels:
    """The elementwise parts of a layer: PyTorch's own kernels (several per part), or fused by
    torch.compile (about one each), which is closer to vLLM's hand-fused kernels; the GEMMs and the
    attention kernel are the same either way."""

    def __init__(self, fuse):
        wrap = (lambda f: torch.compile(f, dynamic=True, fullgraph=True)) if fuse else (lambda f: f)
        self.add_rms_norm, self.rope, self.silu_mul = wrap(add_rms_norm), wrap(rope), wrap(silu_mul)
        self.rms_norm = wrap(rms_norm)


def forward(model, kernels, ids, positions, k_cache, v_cache, context, cos_table, sin_table, gqa, prefill):
    """One step. Prefill: ids [1, T] at positions 0..T-1. Decode: ids [B, 1] at position `context`,
    attending to the `context` cached tokens plus itself. Writes the step's K and V into the caches.
    Returns the logits of each sequence's last token, as a serving engine computes only those."""
    a = model.a
    batch, tokens = ids.shape
    x = model.embed[ids]
    cos = cos_table[positions].unsqueeze(1)  # [B or 1, 1, T, D/2]
    sin = sin_table[positions].unsqueeze(1)
    q_end, k_end = a.heads * a.head_dim, (a.heads + a.kv_heads) * a.head_dim
    h = kernels.rms_norm(x, model.layers[0]['norm1'])
    for i, layer in enumerate(model.layers):
        qkv = h @ layer['wqkv']
        q = qkv[..., :q_end].view(batch, tokens, a.heads, a.head_dim).transpose(1, 2)
        k = qkv[..., q_end:k_end].view(batch, tokens, a.kv_heads, a.head_dim).transpose(1, 2)
        v = qkv[..., k_end:].view(batch, tokens, a.kv_heads, a.head_dim).transpose(1, 2)
        q, k = kernels.rope(q, k, cos, sin)
        if prefill:
            k_cache[i][:, :, :tokens] = k
            v_cache[i][:, :, :tokens] = v
            o = attention(q, k, v, True, gqa)
        else:
            k_cache[i][:, :, context:context + 1] = k
            v_cache[i][:, :, context:context + 1] = v
            o = attention(q, k_cache[i][:, :, :context + 1], v_cache[i][:, :, :context + 1], False, gqa)
        x, h = kernels.add_rms_norm(x, o.transpose(1, 2).reshape(batch, tokens, q_end) @ layer['wo'], layer['norm2'])
        mlp = kernels.silu_mul(h @ layer['wgu']) @ layer['wdown']
        following = model.layers[i + 1]['norm1'] if i + 1 < len(model.layers) else model.norm
        x, h = kernels.add_rms_norm(x, mlp, following)
    return h[:, -1] @ model.head


def supports_gqa(a, device, dtype):
    q = torch.zeros(1, a.heads, 4, a.head_dim, device=device, dtype=dtype)
    k = torch.zeros(1, a.kv_heads, 4, a.head_dim, device=device, dtype=dtype)
    try:
        F.scaled_dot_product_attention(q, k, k, is_causal=True, enable_gqa=True)
        return True
    except (AttributeError, TypeError):  # no SDPA (before 2.0) or no enable_gqa (before 2.5)
        return False


def time_step(run, reps, cuda):
    """Mean seconds of one call of `run`, replayed from a CUDA graph on a GPU."""
    if not cuda:
        run()
        return None
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):  # warm-up outside the graph: cuBLAS picks its algorithms and workspaces
            run()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        run()
    for _ in range(3):
        graph.replay()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(reps):
        graph.replay()
    end.record()
    torch.cuda.synchronize()
    seconds = start.elapsed_time(end) / 1000 / reps
    del graph
    return seconds


def guarded(measure):
    """One step's seconds, or the error as text: one failing shape (out of memory, say) should not
    cost the device time the others took."""
    try:
        return measure()
    except RuntimeError as e:  # torch.cuda.OutOfMemoryError is one
        return f'error: {str(e).splitlines()[0]}'


def main():
    a = args_from_cli()
    cuda = torch.cuda.is_available() and not a.tiny
    device = 'cuda' if cuda else 'cpu'
    dtype = torch.bfloat16 if cuda else torch.float32
    torch.manual_seed(0)
    model = Decoder(a, device, dtype)
    gqa = supports_gqa(a, device, dtype)
    fuse = a.fuse and cuda and hasattr(torch, 'compile')
    kernels = Kernels(fuse)
    longest = max(max(a.prefill), max(c + 1 for _, c in a.decode))
    inv = 1.0 / (500000.0 ** (torch.arange(0, a.head_dim, 2, device=device, dtype=torch.float32) / a.head_dim))
    angles = torch.outer(torch.arange(longest, device=device, dtype=torch.float32), inv)
    cos_table, sin_table = angles.cos().to(dtype), angles.sin().to(dtype)

    out = dict(device=torch.cuda.get_device_name() if cuda else 'cpu (--tiny: no timings)',
               torch=torch.__version__, dtype=str(dtype).replace('torch.', ''), gqa_kernel=gqa, fused=fuse,
               model=dict(layers=a.layers, hidden=a.hidden, heads=a.heads, kv_heads=a.kv_heads,
                          head_dim=a.head_dim, intermediate=a.intermediate, vocab=a.vocab),
               weight_bytes=model.weight_bytes,
               kv_bytes_per_token=2 * a.layers * a.kv_heads * a.head_dim * (2 if cuda else 4),
               reps=a.reps, prefill=[], decode=[])

    with torch.no_grad():
        for tokens in a.prefill:
            k_cache = [torch.empty(1, a.kv_heads, tokens, a.head_dim, device=device, dtype=dtype)
                       for _ in range(a.layers)]
            v_cache = [torch.empty_like(t) for t in k_cache]
            ids = torch.randint(0, a.vocab, (1, tokens), device=device)
            positions = torch.arange(tokens, device=device).unsqueeze(0)
            step = lambda: forward(model, kernels, ids, positions, k_cache, v_cache, 0,  # noqa: E731
                                   cos_table, sin_table, gqa, True)
            if fuse and 'fused_max_abs_difference' not in out:
                # The fused kernels must compute what the eager ones do, or their timing means nothing.
                eager = forward(model, Kernels(False), ids, positions, k_cache, v_cache, 0,
                                cos_table, sin_table, gqa, True)
                out['fused_max_abs_difference'] = (step() - eager).abs().max().item()
                out['logits_max_abs'] = eager.abs().max().item()
            seconds = guarded(lambda: time_step(step, a.reps, cuda))
            out['prefill'].append(dict(tokens=tokens, seconds=seconds))
            print(f'prefill {tokens:6d} tokens: {seconds}', file=sys.stderr, flush=True)
            del k_cache, v_cache
        for batch, context in a.decode:
            k_cache = [torch.randn(batch, a.kv_heads, context + 1, a.head_dim, device=device, dtype=dtype)
                       for _ in range(a.layers)]
            v_cache = [torch.randn_like(t) for t in k_cache]
            ids = torch.randint(0, a.vocab, (batch, 1), device=device)
            positions = torch.full((batch, 1), context, device=device)
            step = lambda: forward(model, kernels, ids, positions, k_cache, v_cache, context,  # noqa: E731
                                   cos_table, sin_table, gqa, False)
            seconds = guarded(lambda: time_step(step, a.reps, cuda))
            out['decode'].append(dict(batch=batch, context=context, seconds=seconds))
            print(f'decode batch {batch:4d} context {context:6d}: {seconds}', file=sys.stderr, flush=True)
            del k_cache, v_cache
            if cuda:
                torch.cuda.empty_cache()
    print(json.dumps(out, indent=1))


if __name__ == '__main__':
    main()
