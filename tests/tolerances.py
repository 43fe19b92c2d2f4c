"""The one tolerance table (docs/architecture.md, how to add an op). Fix the data before
relaxing a tolerance."""
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
