#!/usr/bin/env python3
"""Host simulation of src/kernels/cuda/attention_flash.cu's warp-level data movement.

The flash kernels' risk is in their index math: which shared-memory rows each lane hands to
ldmatrix, how mma.sync's A/B/C fragments pair up, the C-to-A repacking of P and dS, the quad
reductions, the causal and partial-block edges. This script replays the three kernels lane by
lane with the PTX ISA's documented fragment layouts (ldmatrix .x4 with and without .trans,
mma.m16n8k16 row.col) emulated in numpy, the same loops and the same address expressions as the
.cu file, and compares the results with a float64 evaluation of the 16-bit spec
(kernels/attention.h, AttentionDesc::round_probs). It checks the kernels' logic, not the
compiler, the hardware or the PTX syntax: the device conformance run (scripts/check-cuda.sh)
does that. Keep the two in step when the kernels change.

  sim_flash_attention.py [--head-size 32] [--t 200] [--tk T] [--bh 2] [--noncausal] [--seed 0]

Exit status 0 when every output is within the spec's tolerance, 1 otherwise.
"""
import argparse
import sys

import numpy as np

ROWS = COLS = 64
LOG2E = 1.4426950408889634


def bf16(x):
    """Round float32 values to bfloat16 (RNE), returned as float32."""
    a = np.atleast_1d(np.asarray(x, dtype=np.float32))
    u = a.view(np.uint32).astype(np.uint64)
    s16, one = np.uint64(16), np.uint64(1)
    u = ((u + np.uint64(0x7FFF) + ((u >> s16) & one)) >> s16) << s16
    r = u.astype(np.uint32).view(np.float32)
    return r.reshape(np.shape(x)) if np.ndim(x) else r[0]


# ---- the PTX fragment layouts ----

LANE = np.arange(32)
G, C = LANE // 4, LANE % 4


def ldmatrix_x4(tile, rows, cols, trans=False):
    """regs[lane, i, j]: lane gives the row address (rows[lane], cols[lane]) of matrix lane // 8."""
    regs = np.zeros((32, 4, 2), np.float32)
    for i in range(4):
        for t in range(32):
            for j in range(2):
                if not trans:
                    src = 8 * i + t // 4
                    regs[t, i, j] = tile[rows[src], cols[src] + 2 * (t % 4) + j]
                else:
                    src = 8 * i + 2 * (t % 4) + j
                    regs[t, i, j] = tile[rows[src], cols[src] + t // 4]
    return regs


def mma(c, a, b0, b1):
    """c[32, 4] += A (16x16, fragments a[32, 4, 2]) B (16x8, fragments b0, b1 [32, 2])."""
    A = np.zeros((16, 16))
    B = np.zeros((16, 8))
    Cm = np.zeros((16, 8))
    for j in range(2):
        A[G, 2 * C + j] = a[:, 0, j]
        A[G + 8, 2 * C + j] = a[:, 1, j]
        A[G, 2 * C + 8 + j] = a[:, 2, j]
        A[G + 8, 2 * C + 8 + j] = a[:, 3, j]
        B[2 * C + j, G] = b0[:, j]
        B[2 * C + 8 + j, G] = b1[:, j]
        Cm[G, 2 * C + j] = c[:, j]
        Cm[G + 8, 2 * C + j] = c[:, 2 + j]
    D = (A @ B + Cm).astype(np.float32)
    for j in range(2):
        c[:, j] = D[G, 2 * C + j]
        c[:, 2 + j] = D[G + 8, 2 * C + j]


def c_to_a(lo, hi):
    """The A fragment of a 16-wide k slice from two C fragments, rounded (the spec's r())."""
    a = np.zeros((32, 4, 2), np.float32)
    a[:, 0, :] = bf16(lo[:, 0:2])
    a[:, 1, :] = bf16(lo[:, 2:4])
    a[:, 2, :] = bf16(hi[:, 0:2])
    a[:, 3, :] = bf16(hi[:, 2:4])
    return a


def quad(x, op):
    """The butterfly over the 4 lanes of a fragment row (xor 1, then xor 2)."""
    x = op(x, x[LANE ^ 1])
    return op(x, x[LANE ^ 2])


# ---- the kernels' shared pieces (same expressions as the .cu file) ----

def scores(a_tile, a_row0, b_tile, D):
    acc = np.zeros((8, 32, 4), np.float32)
    for kk in range(D // 16):
        af = ldmatrix_x4(a_tile, a_row0 + (LANE & 7) + ((LANE >> 3) & 1) * 8, kk * 16 + (LANE >> 4) * 8)
        for np_ in range(4):
            bf = ldmatrix_x4(b_tile, np_ * 16 + (LANE & 7) + (LANE >> 4) * 8, kk * 16 + ((LANE >> 3) & 1) * 8)
            mma(acc[2 * np_], af, bf[:, 0], bf[:, 1])
            mma(acc[2 * np_ + 1], af, bf[:, 2], bf[:, 3])
    return acc


def product(out, p, m_tile, D):
    for kk in range(4):
        af = c_to_a(p[2 * kk], p[2 * kk + 1])
        for np_ in range(D // 16):
            bf = ldmatrix_x4(m_tile, kk * 16 + (LANE & 7) + ((LANE >> 3) & 1) * 8, np_ * 16 + (LANE >> 4) * 8,
                             trans=True)
            mma(out[2 * np_], af, bf[:, 0], bf[:, 1])
            mma(out[2 * np_ + 1], af, bf[:, 2], bf[:, 3])


def load_tile(m, row0, D):
    """Rows row0.. of m [t, D] into a [64][D + 8] tile (the padding columns never read); zeros past the end."""
    tile = np.zeros((ROWS, D + 8), np.float32)
    n = max(0, min(ROWS, m.shape[0] - row0))
    tile[:n, :D] = m[row0:row0 + n]
    return tile


def visible_keys(causal, tq, tk, i0):
    if not causal:
        return tk
    return min(min(i0 + ROWS, tq), tk)


def score(causal, tq, tk, row, key, dot, scale):
    s = np.float32(scale) * dot
    return np.where((row < tq) & (key < tk) & ~(causal & (key > row)), s, -np.inf).astype(np.float32)


# ---- the three kernels ----

def forward(q, k, v, scale, causal):
    tq, D = q.shape
    tk = k.shape[0]
    out = np.full((tq, D), np.nan, np.float32)
    lse = np.full(tq, np.nan, np.float32)
    for i0 in range(0, tq, ROWS):
        sq = load_tile(q, i0, D)
        keys = visible_keys(causal, tq, tk, i0)
        for warp in range(4):
            acc = np.zeros((D // 8, 32, 4), np.float32)
            m = np.full((2, 32), -np.inf, np.float32)
            l = np.zeros((2, 32), np.float32)
            row_base = i0 + warp * 16 + LANE // 4
            for j0 in range(0, keys, COLS):
                kt, vt = load_tile(k, j0, D), load_tile(v, j0, D)
                s = scores(sq, warp * 16, kt, D)
                for n in range(8):
                    for e in range(4):
                        s[n, :, e] = score(causal, tq, tk, row_base + (e >> 1) * 8,
                                           j0 + n * 8 + (LANE % 4) * 2 + (e & 1), s[n, :, e], scale)
                mx = m.copy()
                for n in range(8):
                    for e in range(4):
                        mx[e >> 1] = np.maximum(mx[e >> 1], s[n, :, e])
                base = np.zeros_like(m)
                alpha = np.zeros_like(m)
                for h in range(2):
                    mx[h] = quad(mx[h], np.maximum)
                    base[h] = np.where(mx[h] == -np.inf, 0, mx[h])
                    with np.errstate(invalid="ignore"):
                        alpha[h] = np.exp2((m[h] - base[h]) * np.float32(LOG2E))
                    m[h] = mx[h]
                    l[h] *= alpha[h]
                for n in range(8):
                    for e in range(4):
                        p = np.exp2((s[n, :, e] - base[e >> 1]) * np.float32(LOG2E)).astype(np.float32)
                        l[e >> 1] += p
                        s[n, :, e] = p
                for n in range(D // 8):
                    for e in range(4):
                        acc[n, :, e] *= alpha[e >> 1]
                product(acc, s, vt, D)
            for h in range(2):
                total = quad(l[h], np.add)
                row = row_base + h * 8
                empty = m[h] == -np.inf
                inv = np.where(empty, 0, 1 / np.where(empty, 1, total)).astype(np.float32)
                for t in range(32):
                    if row[t] >= tq:
                        continue
                    for n in range(D // 8):
                        for j in range(2):
                            out[row[t], n * 8 + (t % 4) * 2 + j] = bf16(acc[n, t, 2 * h + j] * inv[t])
                    if t % 4 == 0:
                        lse[row[t]] = np.inf if empty[t] else m[h][t] + np.log(total[t])
    return out, lse


def prob_grad(causal, tq, tk, row, key, dot, dp, row_lse, row_dot, scale):
    s = score(causal, tq, tk, row, key, dot, scale)
    with np.errstate(invalid="ignore"):
        p = np.exp2((s - row_lse) * np.float32(LOG2E)).astype(np.float32)
    p = np.where(np.isnan(p), 0, p).astype(np.float32)
    return p, np.where(p == 0, 0, p * (dp - row_dot)).astype(np.float32)


def key_grads(q, k, v, g, lse, rowdot, scale, causal):
    tq, D = q.shape
    tk = k.shape[0]
    dk = np.full((tk, D), np.nan, np.float32)
    dv = np.full((tk, D), np.nan, np.float32)
    for j0 in range(0, tk, ROWS):
        sk, sv = load_tile(k, j0, D), load_tile(v, j0, D)
        first = j0 if causal else 0
        for warp in range(4):
            dk_acc = np.zeros((D // 8, 32, 4), np.float32)
            dv_acc = np.zeros((D // 8, 32, 4), np.float32)
            key_base = j0 + warp * 16 + LANE // 4
            for i0 in range(first, tq, COLS):
                qt, gt = load_tile(q, i0, D), load_tile(g, i0, D)
                slse = np.array([lse[i0 + r] if i0 + r < tq else np.inf for r in range(COLS)], np.float32)
                sdot = np.array([rowdot[i0 + r] if i0 + r < tq else 0 for r in range(COLS)], np.float32)
                st = scores(sk, warp * 16, qt, D)
                dpt = scores(sv, warp * 16, gt, D)
                for n in range(8):
                    for e in range(4):
                        col = n * 8 + (LANE % 4) * 2 + (e & 1)
                        st[n, :, e], dpt[n, :, e] = prob_grad(causal, tq, tk, i0 + col, key_base + (e >> 1) * 8,
                                                              st[n, :, e], dpt[n, :, e], slse[col], sdot[col], scale)
                product(dv_acc, st, gt, D)
                product(dk_acc, dpt, qt, D)
            for h in range(2):
                key = key_base + h * 8
                for t in range(32):
                    if key[t] >= tk:
                        continue
                    for n in range(D // 8):
                        for j in range(2):
                            dk[key[t], n * 8 + (t % 4) * 2 + j] = bf16(np.float32(scale) * dk_acc[n, t, 2 * h + j])
                            dv[key[t], n * 8 + (t % 4) * 2 + j] = bf16(dv_acc[n, t, 2 * h + j])
    return dk, dv


def query_grads(q, k, v, g, lse, rowdot, scale, causal):
    tq, D = q.shape
    tk = k.shape[0]
    dq = np.full((tq, D), np.nan, np.float32)
    for i0 in range(0, tq, ROWS):
        sq, sg = load_tile(q, i0, D), load_tile(g, i0, D)
        keys = visible_keys(causal, tq, tk, i0)
        for warp in range(4):
            row_base = i0 + warp * 16 + LANE // 4
            row_lse = [np.where(row_base + h * 8 < tq, lse[np.minimum(row_base + h * 8, tq - 1)], np.inf)
                       for h in range(2)]
            row_dot = [np.where(row_base + h * 8 < tq, rowdot[np.minimum(row_base + h * 8, tq - 1)], 0)
                       for h in range(2)]
            acc = np.zeros((D // 8, 32, 4), np.float32)
            for j0 in range(0, keys, COLS):
                kt, vt = load_tile(k, j0, D), load_tile(v, j0, D)
                s = scores(sq, warp * 16, kt, D)
                dp = scores(sg, warp * 16, vt, D)
                for n in range(8):
                    for e in range(4):
                        h = e >> 1
                        _, s[n, :, e] = prob_grad(causal, tq, tk, row_base + h * 8,
                                                  j0 + n * 8 + (LANE % 4) * 2 + (e & 1), s[n, :, e], dp[n, :, e],
                                                  row_lse[h].astype(np.float32), row_dot[h].astype(np.float32), scale)
                product(acc, s, kt, D)
            for h in range(2):
                row = row_base + h * 8
                for t in range(32):
                    if row[t] >= tq:
                        continue
                    for n in range(D // 8):
                        for j in range(2):
                            dq[row[t], n * 8 + (t % 4) * 2 + j] = bf16(np.float32(scale) * acc[n, t, 2 * h + j])
    return dq


# ---- the spec in float64 ----

def spec(q, k, v, g, scale, causal):
    q, k, v, g = (x.astype(np.float64) for x in (q, k, v, g))
    tq, tk = q.shape[0], k.shape[0]
    s = scale * (q @ k.T)
    if causal:
        s[np.triu(np.ones((tq, tk), bool), 1)] = -np.inf
    m = s.max(axis=1, keepdims=True)
    pt = np.exp(s - m)
    l = pt.sum(axis=1, keepdims=True)
    out = (bf16(pt.astype(np.float32)).astype(np.float64) @ v) / l
    lse = (m + np.log(l))[:, 0]
    p = np.exp(s - lse[:, None])
    out_stored = bf16(out.astype(np.float32)).astype(np.float64)
    dd = (g * out_stored).sum(axis=1, keepdims=True)
    dp = g @ v.T
    ds = p * (dp - dd)
    r = lambda x: bf16(x.astype(np.float32)).astype(np.float64)  # noqa: E731
    dv = r(p).T @ g
    dq = scale * r(ds) @ k
    dk = scale * r(ds).T @ q
    return out, lse, dq, dk, dv, dd[:, 0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--head-size", type=int, default=32)
    ap.add_argument("--t", type=int, default=200)
    ap.add_argument("--tk", type=int, default=None)
    ap.add_argument("--noncausal", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    D, tq = a.head_size, a.t
    tk = a.tk if a.tk is not None else tq
    causal = not a.noncausal
    rng = np.random.default_rng(a.seed)
    q, k, v, g = (bf16(rng.uniform(-2, 2, (t, D)).astype(np.float32)) for t in (tq, tk, tk, tq))
    scale = np.float32(1 / np.sqrt(D))
    out, lse = forward(q, k, v, scale, causal)
    ref_out, ref_lse, ref_dq, ref_dk, ref_dv, ref_dd = spec(q, k, v, g, scale, causal)
    rowdot = ref_dd.astype(np.float32)  # D_i, as attention.cu's row_dot_kernel gives it
    dk, dv = key_grads(q, k, v, g, ref_lse.astype(np.float32), rowdot, scale, causal)
    dq = query_grads(q, k, v, g, ref_lse.astype(np.float32), rowdot, scale, causal)
    ok = True
    for name, got, want in (("out", out, ref_out), ("lse", lse, ref_lse), ("dq", dq, ref_dq),
                            ("dk", dk, ref_dk), ("dv", dv, ref_dv)):
        rows_expected = want.shape[0]
        if got.shape != want.shape or np.isnan(got).any():
            print("%s: %d unwritten or NaN elements" % (name, int(np.isnan(got).sum())))
            ok = False
            continue
        err = np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30)
        # bf16 operands and outputs: a few bf16 roundings (eps 2^-8) relative, never more.
        good = err < 1e-2
        ok &= good
        print("%-4s rows %4d  rel. error %.2e  %s" % (name, rows_expected, err, "ok" if good else "FAIL"))
    # A wrong fragment mapping gives errors of order 1; the 16-bit roundings give ~1e-3.
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
