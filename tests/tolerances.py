"""The one tolerance table (docs/architecture.md, how to add an op). Fix the data before
relaxing a tolerance."""
ELEMENTWISE = dict(rtol=1e-5, atol=1e-6)  # preprocess, silu, adain apply
REDUCTION = dict(rtol=1e-4, atol=1e-5)    # channel_stats, adain with computed stats
FILTER = dict(rtol=1e-4, atol=1e-4)       # guided filter (box sums over up to (2r+1)^2 values)
NODE_TESTS = dict(rtol=1e-4, atol=1e-5)   # ONNX backend node tests: tiny float32 inputs
