"""The one tolerance table (docs/architecture.md, how to add an op). Fix the data before
relaxing a tolerance."""
import numpy as np

ELEMENTWISE = dict(rtol=1e-5, atol=1e-6)  # preprocess, silu, adain apply
REDUCTION = dict(rtol=1e-4, atol=1e-5)    # channel_stats, adain with computed stats
FILTER = dict(rtol=1e-4, atol=1e-4)       # guided filter (box sums over up to (2r+1)^2 values)
NODE_TESTS = dict(rtol=1e-4, atol=1e-5)   # ONNX backend node tests: tiny float32 inputs

# Reduced-precision convolution (ops.Conv2d precision='bf16' / 'int8'): error bounds derived
# from the rounding, per output value, against the float64 reference. abs_conv = conv(|x|, |w|).
# bf16: x and w each rounded to 8 significant bits (unit roundoff u = 2^-8 each), products exact
# in fp32, fp32 sums: |dy| <= (2u + u^2) * abs_conv, plus the fp32 sum error (REDUCTION).
BF16_PRODUCT = 2.0 ** -7 + 2.0 ** -16
# int8: x within sa/2 of its level, w within sw/2 (sa = range / levels, sw = max|w_o| / 127):
# |dy| <= sa/2 * sum|w_o| + sw/2 * window sum|x| + K * sa * sw / 4, times INT8_SLACK for the
# float32 scale arithmetic.
INT8_SLACK = 1.05
# The activations the epilogue applies after the sum are at most this steep (SiLU's slope peaks
# at 1.0998; ReLU and leaky ReLU 1), so they scale a bound on the sum by at most this factor.
ACT_LIPSCHITZ = 1.1
# Quality guard of a whole model at reduced precision against its own fp32 output (PSNR, dB,
# on pictures in [0, 255]).
GUARD_PSNR_DB = {"bf16": 45.0, "int8": 40.0}

# Winograd F(m x m, 3 x 3) (fp32: m = 4, cpu_ops/src/conv2d/winograd_f43.h; bf16: m = 2,
# conv2d_lowp/winograd_f23.h): Y = AT [(G g G^T) .* (BT d BT^T)] AT^T per m x m tile of outputs.
# Its sums add terms of size |AT| (sum_c |G||g_c||G|^T .* |BT||d_c||BT|^T) |AT|^T
# (winograd_magnitude), not |w| * |x| as the direct sum: the rounding bounds of a Winograd path
# scale that magnitude.
WINOGRAD = {
    2: ([[1, 1, 1, 0], [0, 1, -1, -1]],
        [[1, 0, 0], [.5, .5, .5], [.5, -.5, .5], [0, 0, 1]],
        [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]]),
    4: ([[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]],
        [[1 / 4, 0, 0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6],
         [1 / 24, 1 / 12, 1 / 6], [1 / 24, -1 / 12, 1 / 6], [0, 0, 1]],
        [[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0], [0, -2, -1, 2, 1, 0],
         [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]]),
}


def winograd_magnitude(x, wt, p, m):
    """Per output value of the 3x3 stride-1 conv of x (N, C, H, W) by wt (O, C, 3, 3), pad p, in
    F(m x m, 3 x 3) tiles: |AT| (sum_c |U_c| .* |V_c|) |AT|^T with |U| <= |G||g||G|^T and
    |V| <= |BT||d||BT|^T, i.e. per tile K (x) K applied to |w| and the (m+2)^2 patch of |x|, where
    K[i, u, s] = sum over transform positions a of |AT|_ia |G|_au |BT|_as."""
    at, g, bt = (np.abs(np.array(a, np.float64)) for a in WINOGRAD[m])
    k = np.einsum("ia,au,as->ius", at, g, bt)
    t = m + 2
    n, c, h, w = x.shape
    oh, ow = h + 2 * p - 2, w + 2 * p - 2
    th, tw = -(-oh // m), -(-ow // m)
    xp = np.zeros((n, c, m * th + 2, m * tw + 2))
    xp[:, :, p:p + h, p:p + w] = np.abs(x)
    patches = np.lib.stride_tricks.sliding_window_view(xp, (t, t), axis=(2, 3))[:, :, ::m, ::m]
    q = np.einsum("ius,jvt,ncyxst->ncyxiujv", k, k, patches)
    mag = np.einsum("ocuv,ncyxiujv->noyixj", np.abs(wt).astype(np.float64), q)
    return mag.reshape(n, wt.shape[0], m * th, m * tw)[:, :, :oh, :ow]
