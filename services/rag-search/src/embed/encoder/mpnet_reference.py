"""An independent MPNet forward pass in f64 (plain Python), for the two-layer, 8-dimension
model of `tests::tiny_mpnet`: positions from the padding id + 1, T5-style relative position
buckets, post-norm layers, exact GELU, mean pooling over real tokens, L2 normalisation.
The dense layers' weights are rounded to bf16 first, as ploke_matmul holds them (`--f32`
keeps them as they are). Prints the two pooled vectors the test expects."""
import math
import struct
import sys


def f32(v):
    return struct.unpack("<f", struct.pack("<f", v))[0]


def bf16(v):
    bits = struct.unpack("<I", struct.pack("<f", v))[0]
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16
    return struct.unpack("<f", struct.pack("<I", bits & 0xFFFFFFFF))[0]


H, HEADS, INNER, LAYERS, BUCKETS, PAD, EPS = 8, 2, 16, 2, 32, 1, 1e-5
names = [("embeddings.word_embeddings.weight", (20, 8)),
         ("embeddings.position_embeddings.weight", (40, 8)),
         ("embeddings.LayerNorm.weight", (8,)), ("embeddings.LayerNorm.bias", (8,))]
for l in range(LAYERS):
    p = f"encoder.layer.{l}."
    for n in "qkvo":
        names += [(f"{p}attention.attn.{n}.weight", (8, 8)), (f"{p}attention.attn.{n}.bias", (8,))]
    names += [(p + n, s) for n, s in [
        ("attention.LayerNorm.weight", (8,)), ("attention.LayerNorm.bias", (8,)),
        ("intermediate.dense.weight", (16, 8)), ("intermediate.dense.bias", (16,)),
        ("output.dense.weight", (8, 16)), ("output.dense.bias", (8,)),
        ("output.LayerNorm.weight", (8,)), ("output.LayerNorm.bias", (8,))]]
names.append(("encoder.relative_attention_bias.weight", (32, 2)))

round_dense = "--f32" not in sys.argv
W = {}
for place, (name, shape) in enumerate(names):
    seed = place * 1.3
    n = math.prod(shape)
    vals = []
    for i in range(n):
        x = f32(math.sin(0.37 * i + seed) * 0.5)
        if "LayerNorm.weight" in name:
            x = f32(1.0 + f32(f32(0.2) * x))
        elif "relative_attention_bias" in name:
            x = f32(f32(6.0) * x)
        vals.append(x)
    dense = name.endswith(".weight") and len(shape) == 2 and "embeddings" not in name \
        and "relative" not in name
    if dense and round_dense:
        vals = [bf16(v) for v in vals]
    W[name] = [vals[r * shape[1]:(r + 1) * shape[1]] for r in range(shape[0])] if len(shape) == 2 else vals


def linear(x, w, b):
    return [[sum(xi * wi for xi, wi in zip(row, wr)) + bo for wr, bo in zip(w, b)] for row in x]


def norm(x, g, b):
    out = []
    for row in x:
        m = sum(row) / len(row)
        v = sum((a - m) ** 2 for a in row) / len(row)
        out.append([(a - m) / math.sqrt(v + EPS) * gi + bi for a, gi, bi in zip(row, g, b)])
    return out


def bucket(query, key):
    half = BUCKETS // 2
    exact = half // 2
    n = query - key
    ret = half if n < 0 else 0
    n = abs(n)
    if n < exact:
        return ret + n
    # In f32, as the reference computes it: a distance on a bucket's edge (16, 32, 64) falls
    # the same way.
    ratio = f32(f32(math.log(f32(n / exact))) / f32(math.log(128 / exact)))
    large = exact + int(f32(ratio * (half - exact)))
    return ret + min(large, half - 1)


def encode(ids, mask):
    # Real tokens first, padding after: each token's position is PAD + 1 + its index.
    pos = [PAD + 1 + i for i in range(len(ids))]
    x = [[a + b for a, b in zip(W["embeddings.word_embeddings.weight"][t],
                                W["embeddings.position_embeddings.weight"][p])]
         for t, p in zip(ids, pos)]
    x = norm(x, W["embeddings.LayerNorm.weight"], W["embeddings.LayerNorm.bias"])
    T, d = len(ids), H // HEADS
    rel = W["encoder.relative_attention_bias.weight"]
    for l in range(LAYERS):
        p = f"encoder.layer.{l}."
        q, k, v = (linear(x, W[f"{p}attention.attn.{n}.weight"], W[f"{p}attention.attn.{n}.bias"])
                   for n in "qkv")
        ctx = [[0.0] * H for _ in range(T)]
        for h in range(HEADS):
            for i in range(T):
                s = [sum(q[i][h * d + c] * k[j][h * d + c] for c in range(d)) / math.sqrt(d)
                     + rel[bucket(i, j)][h] + (0.0 if mask[j] else -1e30) for j in range(T)]
                top = max(s)
                e = [math.exp(a - top) for a in s]
                z = sum(e)
                for c in range(d):
                    ctx[i][h * d + c] = sum(e[j] / z * v[j][h * d + c] for j in range(T))
        o = linear(ctx, W[f"{p}attention.attn.o.weight"], W[f"{p}attention.attn.o.bias"])
        x = norm([[a + b for a, b in zip(r1, r2)] for r1, r2 in zip(o, x)],
                 W[f"{p}attention.LayerNorm.weight"], W[f"{p}attention.LayerNorm.bias"])
        inner = linear(x, W[f"{p}intermediate.dense.weight"], W[f"{p}intermediate.dense.bias"])
        inner = [[0.5 * a * (1 + math.erf(a / math.sqrt(2))) for a in r] for r in inner]
        out = linear(inner, W[f"{p}output.dense.weight"], W[f"{p}output.dense.bias"])
        x = norm([[a + b for a, b in zip(r1, r2)] for r1, r2 in zip(out, x)],
                 W[f"{p}output.LayerNorm.weight"], W[f"{p}output.LayerNorm.bias"])
    real = [r for r, m in zip(x, mask) if m]
    mean = [sum(c) / len(real) for c in zip(*real)]
    n2 = math.sqrt(sum(a * a for a in mean))
    return [a / n2 for a in mean]


ids = [0] + [(3 * i + 5) % 20 for i in range(22)] + [2]
for name, vec in [("long", encode(ids, [True] * 24)),
                  ("short", encode(ids[:6] + [PAD] * 18, [True] * 6 + [False] * 18))]:
    print(name, ", ".join(f"{a:.6f}" for a in vec))
