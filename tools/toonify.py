"""Deterministic photo -> anime-style ("toon") filter: the synthetic input side of a2r_lite's
training pairs and of its evaluation.

toonify(bgr_u8) -> bgr_u8, same shape. Three fixed steps, all OpenCV (deterministic, no RNG):
  1. edge-preserving smoothing: bilateral filter, twice (flat cel-shaded regions, edges kept);
  2. colour quantisation: uniform levels per channel (posterised bands, as in cel shading);
  3. line art: adaptive threshold of the median-blurred gray picture, drawn as dark ink.
The parameters are fixed on purpose: the model learns to undo exactly this recipe, and the
evaluation re-applies it to the held-out photos.
"""
import numpy as np
import cv2

# Bilateral: 9 px window, sigma colour 40 (of 255) merges texture but keeps object edges;
# two passes flatten more than one wide pass at lower cost.
BILATERAL_D = 9
BILATERAL_SIGMA_COLOR = 40.0
BILATERAL_SIGMA_SPACE = 7.0
BILATERAL_PASSES = 2
# 8 levels per channel (step 32): visible bands, yet hue kept close to the photo.
QUANT_STEP = 32
# Line art: median 5 removes pixel noise; 9 px adaptive block, offset 5 gray levels marks
# pixels darker than their neighbourhood mean (contours, creases) as ink.
MEDIAN_K = 5
LINE_BLOCK = 9
LINE_C = 5
INK = 24  # ink colour (gray level): dark, not pure black, as most anime line art


def toonify(bgr_u8):
    """Photo (H, W, 3) uint8 BGR -> toon (H, W, 3) uint8 BGR. Gray (H, W) input is made 3-channel."""
    img = np.asarray(bgr_u8)
    if img.dtype != np.uint8:
        raise TypeError(f"bgr_u8 must be uint8, got {img.dtype}")
    if img.ndim == 2:
        img = cv2.cvtColor(img, cv2.COLOR_GRAY2BGR)
    if img.ndim != 3 or img.shape[2] != 3:
        raise ValueError(f"bgr_u8 must have shape (H, W, 3) or (H, W), got {img.shape}")
    img = np.ascontiguousarray(img)
    smooth = img
    for _ in range(BILATERAL_PASSES):
        smooth = cv2.bilateralFilter(smooth, BILATERAL_D, BILATERAL_SIGMA_COLOR,
                                     BILATERAL_SIGMA_SPACE)
    quant = (smooth // QUANT_STEP) * QUANT_STEP + QUANT_STEP // 2
    gray = cv2.medianBlur(cv2.cvtColor(img, cv2.COLOR_BGR2GRAY), MEDIAN_K)
    lines = cv2.adaptiveThreshold(gray, 255, cv2.ADAPTIVE_THRESH_MEAN_C, cv2.THRESH_BINARY,
                                  LINE_BLOCK, LINE_C)
    out = quant.astype(np.uint8)
    out[lines == 0] = INK
    return out


if __name__ == "__main__":
    import sys
    src, dst = sys.argv[1], sys.argv[2]
    cv2.imwrite(dst, toonify(cv2.imread(src, cv2.IMREAD_COLOR)))
