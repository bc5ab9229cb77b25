#!/usr/bin/env python3
"""The decode step braid-cuda-bench times, in PyTorch: eager and CUDA graphs.

The reference users compare against: a LLaMA-family decoder (RMSNorm, RoPE,
GQA attention over a static KV cache, SwiGLU MLP, lm_head) built from the
same Hugging Face config.json, with the same layer count, batch, cache length
and decode position as the braid plan, in bf16 (or fp16/fp32), on one GPU.
Weights are random: the work, not the values, is what is timed.

Writes {"eager_ms", "graph_ms", ...} (medians of CUDA-event step times) for
braid-cuda-bench --torch. Exits 77 when PyTorch or a GPU is missing.

  python3 bench/torch_decode.py models/llama-3-8b.json --layers 2 \
      --batch 1 --max-seq 4096 --iters 100 -o torch.json
"""
import argparse
import json
import sys


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("config", help="Hugging Face config.json (LLaMA family)")
    p.add_argument("--layers", type=int, help="decoder layers (default: the config's)")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--max-seq", type=int, default=4096, help="KV cache length")
    p.add_argument("--position", type=int, default=-1,
                   help="decode position (default: the last cache row)")
    p.add_argument("--dtype", choices=["bf16", "fp16", "fp32"], default="bf16")
    p.add_argument("--iters", type=int, default=100)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("-o", "--output", required=True, help="result JSON")
    return p.parse_args()


def main():
    args = parse_args()
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        print("torch_decode.py: skipped: PyTorch is not installed", file=sys.stderr)
        return 77
    if not torch.cuda.is_available():
        print("torch_decode.py: skipped: no CUDA device", file=sys.stderr)
        return 77

    with open(args.config) as f:
        cfg = json.load(f)
    family = cfg.get("model_type", "llama")
    if family not in ("llama", "mistral", "qwen2"):
        print(f"torch_decode.py: error: model_type '{family}' is not a LLaMA-family "
              "decoder", file=sys.stderr)
        return 1
    hidden = cfg["hidden_size"]
    heads = cfg["num_attention_heads"]
    kv_heads = cfg.get("num_key_value_heads", heads)
    head_dim = cfg.get("head_dim") or hidden // heads
    inter = cfg["intermediate_size"]
    vocab = cfg["vocab_size"]
    layers = args.layers or cfg["num_hidden_layers"]
    eps = cfg.get("rms_norm_eps", 1e-5)
    theta = cfg.get("rope_theta", 10000.0)
    bias = family == "qwen2"  # q/k/v biases
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[args.dtype]
    dev = torch.device("cuda")
    B, S = args.batch, args.max_seq
    pos = args.position if args.position >= 0 else S - 1
    if not 0 <= pos < S:
        print(f"torch_decode.py: error: --position {pos} is outside the cache of {S}",
              file=sys.stderr)
        return 1
    torch.manual_seed(0)

    def w(*shape):
        return (torch.randn(*shape, device=dev, dtype=torch.float32) * 0.02).to(dtype)

    class Layer:
        def __init__(self):
            self.ln1 = torch.ones(hidden, device=dev, dtype=dtype)
            self.ln2 = torch.ones(hidden, device=dev, dtype=dtype)
            self.wq, self.wk, self.wv = w(heads * head_dim, hidden), w(kv_heads * head_dim, hidden), w(kv_heads * head_dim, hidden)
            self.bq = w(heads * head_dim) if bias else None
            self.bk = w(kv_heads * head_dim) if bias else None
            self.bv = w(kv_heads * head_dim) if bias else None
            self.wo = w(hidden, heads * head_dim)
            self.wg, self.wu, self.wd = w(inter, hidden), w(inter, hidden), w(hidden, inter)
            self.kc = torch.zeros(B, kv_heads, S, head_dim, device=dev, dtype=dtype)
            self.vc = torch.zeros(B, kv_heads, S, head_dim, device=dev, dtype=dtype)

    stack = [Layer() for _ in range(layers)]
    embed = w(vocab, hidden)
    final_norm = torch.ones(hidden, device=dev, dtype=dtype)
    lm_head = embed if cfg.get("tie_word_embeddings", False) else w(vocab, hidden)
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, device=dev, dtype=torch.float32) / head_dim))

    # Static inputs: a graph replays with whatever these hold.
    ids = torch.ones(B, 1, device=dev, dtype=torch.long)
    position = torch.full((1,), pos, device=dev, dtype=torch.long)

    def rms_norm(x, weight):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(dtype) * weight

    def rope(x, cos, sin):  # x [B, H, 1, D], rotate_half
        x1, x2 = x[..., : head_dim // 2], x[..., head_dim // 2:]
        return x * cos + torch.cat((-x2, x1), dim=-1) * sin

    def step():
        x = F.embedding(ids, embed)  # [B, 1, H]
        angles = position.float()[:, None] * inv_freq[None, :]
        emb = torch.cat((angles, angles), dim=-1)
        cos, sin = emb.cos().to(dtype), emb.sin().to(dtype)
        for L in stack:
            h = rms_norm(x, L.ln1)
            q = F.linear(h, L.wq, L.bq).view(B, 1, heads, head_dim).transpose(1, 2)
            k = F.linear(h, L.wk, L.bk).view(B, 1, kv_heads, head_dim).transpose(1, 2)
            v = F.linear(h, L.wv, L.bv).view(B, 1, kv_heads, head_dim).transpose(1, 2)
            q, k = rope(q, cos, sin), rope(k, cos, sin)
            L.kc.index_copy_(2, position, k)
            L.vc.index_copy_(2, position, v)
            keys, values = L.kc[:, :, : pos + 1], L.vc[:, :, : pos + 1]
            a = F.scaled_dot_product_attention(q, keys, values, enable_gqa=kv_heads != heads)
            x = x + F.linear(a.transpose(1, 2).reshape(B, 1, heads * head_dim), L.wo)
            h = rms_norm(x, L.ln2)
            x = x + F.linear(F.silu(F.linear(h, L.wg)) * F.linear(h, L.wu), L.wd)
        return F.linear(rms_norm(x, final_norm), lm_head)

    def time_ms(fn):
        for _ in range(args.warmup):
            fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(args.iters):
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            stop.record()
            stop.synchronize()
            times.append(start.elapsed_time(stop))
        times.sort()
        return times[len(times) // 2]

    with torch.inference_mode():
        eager = time_ms(step)
        # Capture after warm-up on a side stream, as the PyTorch docs say.
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                step()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            step()
        graphed = time_ms(graph.replay)

    result = {
        "eager_ms": eager, "graph_ms": graphed,
        "torch": torch.__version__, "device": torch.cuda.get_device_name(),
        "config": args.config, "layers": layers, "batch": B, "max_seq": S,
        "position": pos, "dtype": args.dtype, "iters": args.iters,
        "attention": "scaled_dot_product_attention over cache rows [0, position]",
    }
    with open(args.output, "w") as f:
        json.dump(result, f, indent=2)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
