"""Deterministic photo -> anime-style ("toon") filters: the synthetic input side of a2r_lite's
training pairs and of its evaluation.

toonify(bgr_u8, recipe=None) -> bgr_u8, same shape. A recipe is a plain dict (JSON-able) of four
steps, all OpenCV/numpy, no run-time randomness (the same recipe gives the same picture):
  1. smooth : edge-preserving smoothing, flat cel-shaded regions with object edges kept;
  2. quant  : colour quantisation, posterised bands;
  3. lines  : line art drawn as ink;
  4. finish : optional screentone (manga dot pattern in the dark areas) and JPEG artefacts.
DEFAULT is the fixed recipe of a2r_lite 0.1.0 (toonify(img) is bit-identical to it; the
bundled sample examples/astronaut_toon.png is made with it).
train_recipe(rng) draws from the TRAINING family (bilateral smoothing, per-channel or
hue-preserving uniform quantisation, adaptive-threshold lines of varied thickness and
darkness, screentone, JPEG). wide_recipe(rng) draws from a wider family: half of its draws
are train_recipe's, the others also use median / pyramid smoothing, value-only bands,
gradient-magnitude or morphological-gradient lines (or none) in tinted inks, and soft
(blurred) finishes. UNSEEN recipes use steps never drawn by either (mean-shift / recursive
edge-preserving smoothing, Canny / difference-of-Gaussians lines, k-means palettes, a level
count and a JPEG quality outside the training ranges): the evaluation's generalisation set.
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

DEFAULT = {
    "smooth": {"kind": "bilateral", "d": BILATERAL_D, "sigma_color": BILATERAL_SIGMA_COLOR,
               "sigma_space": BILATERAL_SIGMA_SPACE, "passes": BILATERAL_PASSES},
    "quant": {"kind": "channel", "levels": 256 // QUANT_STEP},
    "lines": {"kind": "adaptive", "median": MEDIAN_K, "block": LINE_BLOCK, "c": LINE_C,
              "thick": 0, "ink": INK},
    "tone": None,
    "jpeg": None,
}

# Held-out-style recipes: each has at least one step never drawn by train_recipe().
UNSEEN = {
    "meanshift_canny_kmeans": {
        "smooth": {"kind": "meanshift", "sp": 9, "sr": 28},
        "quant": {"kind": "kmeans", "colors": 12},
        "lines": {"kind": "canny", "low": 60, "high": 150, "thick": 1, "ink": 30},
        "tone": None, "jpeg": None},
    "recursive_dog_kmeans": {
        "smooth": {"kind": "recursive", "sigma_s": 40, "sigma_r": 0.35},
        "quant": {"kind": "kmeans", "colors": 8},
        "lines": {"kind": "dog", "sigma": 1.2, "k": 1.6, "thresh": 2.0, "thick": 0, "ink": 15},
        "tone": None, "jpeg": None},
    "bilateral_3levels_canny_jpeg20": {   # parameters outside the training ranges
        "smooth": {"kind": "bilateral", "d": 11, "sigma_color": 70.0, "sigma_space": 9.0,
                   "passes": 3},
        "quant": {"kind": "channel", "levels": 3},
        "lines": {"kind": "canny", "low": 40, "high": 120, "thick": 0, "ink": 0},
        "tone": None, "jpeg": 20},
}


def train_recipe(rng):
    """One recipe drawn from the training family (rng: np.random.RandomState)."""
    c = rng.choice
    thick = int(c([0, 0, 1]))
    # Thick (3 px) lines come with a stricter offset and median 7, so that the ink covers
    # about as much of the picture as thin lines do (10-30 %, measured on the evaluation
    # photos) instead of 40-50 % of speckle blots.
    lines = ({"median": int(c([3, 5, 7])), "c": float(rng.uniform(3, 8))} if thick == 0 else
             {"median": 7, "c": float(rng.uniform(9, 12))})
    return {
        "smooth": {"kind": "bilateral", "d": int(c([5, 7, 9])),
                   "sigma_color": float(rng.uniform(20, 60)),
                   "sigma_space": float(rng.uniform(3, 9)), "passes": int(c([1, 2, 3]))},
        "quant": {"kind": str(c(["channel", "hue"])), "levels": int(rng.randint(4, 13))},
        "lines": {"kind": "adaptive", "median": lines["median"],
                  "block": int(c([7, 9, 11, 13])), "c": lines["c"],
                  "thick": thick, "ink": int(rng.randint(0, 81))},
        "tone": ({"period": int(rng.randint(4, 7)), "below": int(rng.randint(70, 130)),
                  "gain": float(rng.uniform(0.6, 0.85))} if rng.rand() < 0.3 else None),
        "jpeg": int(rng.randint(35, 91)) if rng.rand() < 0.5 else None,
    }


def wide_recipe(rng):
    """One recipe of the wider training family: train_recipe's half the time, else its steps
    drawn among more kinds (none of UNSEEN's: no mean-shift or recursive smoothing, no Canny or
    DoG lines, no k-means palette, levels 4..12, JPEG quality >= 35)."""
    if rng.rand() < 0.5:
        return train_recipe(rng)
    r = train_recipe(rng)
    c = rng.choice
    smooth = str(c(["bilateral", "median", "pyramid"]))
    if smooth == "median":      # median: flat patches with rounded corners, then one bilateral
        r["smooth"] = {"kind": "median", "k": int(c([5, 7])), "d": 7,
                       "sigma_color": float(rng.uniform(20, 50)), "sigma_space": 5.0}
    elif smooth == "pyramid":   # bilateral at half resolution: softer, wider cels
        r["smooth"] = {"kind": "pyramid", "d": int(c([5, 7, 9])),
                       "sigma_color": float(rng.uniform(20, 60)),
                       "sigma_space": float(rng.uniform(3, 7)), "passes": int(c([1, 2]))}
    r["quant"]["kind"] = str(c(["channel", "hue", "value"]))
    lines = str(c(["adaptive", "gradient", "morph", "none"]))
    if lines != "adaptive":     # thin lines of a new kind (_ink_mask), their own ink level; the
        # level is drawn for "none" too, so that the later draws (and the recipes a2r_lite 0.2.0
        # was trained on) do not depend on it
        thresh = {"gradient": (60, 140), "morph": (25, 60)}.get(lines)
        r["lines"] = {"kind": lines, "thick": 0}
        if thresh:
            r["lines"]["thresh"] = float(rng.uniform(*thresh))
        r["lines"]["ink"] = int(rng.randint(0, 81))
    if rng.rand() < 0.5:        # coloured ink: dark brown, blue or purple instead of gray
        r["lines"]["tint"] = [float(v) for v in rng.uniform(0.5, 1.5, 3)]
    if rng.rand() < 0.3:        # soft finish: slight blur, as a scaled or filtered cel
        r["blur"] = float(rng.uniform(0.5, 1.2))
    return r


def _smooth(img, p):
    k = p["kind"]
    if k == "bilateral":
        for _ in range(p["passes"]):
            img = cv2.bilateralFilter(img, p["d"], p["sigma_color"], p["sigma_space"])
        return img
    if k == "median":
        return cv2.bilateralFilter(cv2.medianBlur(img, p["k"]), p["d"], p["sigma_color"],
                                   p["sigma_space"])
    if k == "pyramid":
        small = cv2.pyrDown(img)
        for _ in range(p["passes"]):
            small = cv2.bilateralFilter(small, p["d"], p["sigma_color"], p["sigma_space"])
        return cv2.pyrUp(small, dstsize=(img.shape[1], img.shape[0]))
    if k == "meanshift":
        return cv2.pyrMeanShiftFiltering(img, p["sp"], p["sr"])
    if k == "recursive":
        return cv2.edgePreservingFilter(img, flags=cv2.RECURS_FILTER, sigma_s=p["sigma_s"],
                                        sigma_r=p["sigma_r"])
    raise ValueError(f"unknown smooth kind {k!r}")


def _kmeans_palette(img, k, iters=12):
    """Deterministic k-means palette: initial centres are colours at evenly spaced luma
    quantiles of a 4x subsample; 12 Lloyd iterations (converged on 512 px pictures)."""
    px = img[::4, ::4].reshape(-1, 3).astype(np.float32)
    order = np.argsort(px @ np.float32([0.114, 0.587, 0.299]), kind="stable")
    cent = px[order[((np.arange(k) + 0.5) * len(px) / k).astype(int)]].copy()
    for _ in range(iters):
        lab = ((px[:, None] - cent[None]) ** 2).sum(2).argmin(1)
        for j in range(k):
            if np.any(lab == j):
                cent[j] = px[lab == j].mean(0)
    full = img.reshape(-1, 3).astype(np.float32)
    lab = np.concatenate([((full[i:i + 65536, None] - cent[None]) ** 2).sum(2).argmin(1)
                          for i in range(0, len(full), 65536)])
    return np.clip(np.rint(cent[lab]), 0, 255).astype(np.uint8).reshape(img.shape)


def _quant(img, p):
    k = p["kind"]
    if k == "channel":     # uniform levels per channel; mid-bin values
        step = 256 // p["levels"]
        q = np.minimum(img // step, p["levels"] - 1) * step + step // 2
        return q.astype(np.uint8)
    if k in ("hue", "value"):   # hue kept; saturation and value banded (value: only value)
        hsv = cv2.cvtColor(img, cv2.COLOR_BGR2HSV)
        step = 256 // p["levels"]
        for ch in ((1, 2) if k == "hue" else (2,)):
            hsv[..., ch] = (np.minimum(hsv[..., ch] // step, p["levels"] - 1) * step
                            + step // 2).astype(np.uint8)
        return cv2.cvtColor(hsv, cv2.COLOR_HSV2BGR)
    if k == "kmeans":
        return _kmeans_palette(img, p["colors"])
    raise ValueError(f"unknown quant kind {k!r}")


def _ink_mask(img, p):
    gray = cv2.cvtColor(img, cv2.COLOR_BGR2GRAY)
    k = p["kind"]
    if k == "adaptive":    # darker than the local mean by c gray levels
        g = cv2.medianBlur(gray, p["median"])
        mask = cv2.adaptiveThreshold(g, 255, cv2.ADAPTIVE_THRESH_MEAN_C, cv2.THRESH_BINARY,
                                     p["block"], p["c"]) == 0
    elif k == "canny":
        mask = cv2.Canny(cv2.GaussianBlur(gray, (5, 5), 0), p["low"], p["high"]) > 0
    elif k == "dog":       # difference of Gaussians below -thresh: dark side of edges
        g = gray.astype(np.float32)
        dog = (cv2.GaussianBlur(g, (0, 0), p["sigma"])
               - cv2.GaussianBlur(g, (0, 0), p["sigma"] * p["k"]))
        mask = dog < -p["thresh"]
    elif k == "gradient":  # Sobel gradient magnitude of the slightly smoothed gray picture
        g = cv2.GaussianBlur(gray, (3, 3), 0).astype(np.float32)
        mask = cv2.magnitude(cv2.Sobel(g, cv2.CV_32F, 1, 0), cv2.Sobel(g, cv2.CV_32F, 0, 1)) \
            > p["thresh"]
    elif k == "morph":     # morphological gradient (3x3 dilate - erode)
        mask = cv2.morphologyEx(gray, cv2.MORPH_GRADIENT, np.ones((3, 3), np.uint8)) > p["thresh"]
    elif k == "none":
        mask = np.zeros(gray.shape, bool)
    else:
        raise ValueError(f"unknown lines kind {k!r}")
    if p.get("thick", 0):
        ks = 2 * p["thick"] + 1
        mask = cv2.dilate(mask.astype(np.uint8), np.ones((ks, ks), np.uint8)) > 0
    return mask


def _screentone(img, p):
    """Dot screen (period px, dots of radius 0.35 period) darkening pixels whose gray level is
    below p['below'] by the factor p['gain']."""
    h, w = img.shape[:2]
    per = p["period"]
    yy, xx = np.mgrid[0:h, 0:w]
    dots = ((xx % per - per / 2) ** 2 + (yy % per - per / 2) ** 2) < (0.35 * per) ** 2
    sel = dots & (cv2.cvtColor(img, cv2.COLOR_BGR2GRAY) < p["below"])
    out = img.copy()
    out[sel] = (img[sel] * p["gain"]).astype(np.uint8)
    return out


def toonify(bgr_u8, recipe=None):
    """Photo (H, W, 3) uint8 BGR -> toon (H, W, 3) uint8 BGR. Gray (H, W) input is made
    3-channel. recipe: dict as DEFAULT (None = DEFAULT)."""
    img = np.asarray(bgr_u8)
    if img.dtype != np.uint8:
        raise TypeError(f"bgr_u8 must be uint8, got {img.dtype}")
    if img.ndim == 2:
        img = cv2.cvtColor(img, cv2.COLOR_GRAY2BGR)
    if img.ndim != 3 or img.shape[2] != 3:
        raise ValueError(f"bgr_u8 must have shape (H, W, 3) or (H, W), got {img.shape}")
    r = DEFAULT if recipe is None else recipe
    img = np.ascontiguousarray(img)
    out = _quant(_smooth(img, r["smooth"]), r["quant"])
    mask = _ink_mask(img, r["lines"])      # lines from the photo, as an artist inks the scene
    if r.get("tone"):
        out = _screentone(out, r["tone"])
    out = np.ascontiguousarray(out, dtype=np.uint8)
    ink = r["lines"].get("ink", 0)
    if "tint" in r["lines"]:   # per-channel gains (B, G, R order of the picture) on the ink level
        ink = np.clip(np.float32(ink) * np.float32(r["lines"]["tint"]), 0, 255).astype(np.uint8)
    out[mask] = ink
    if r.get("blur"):
        out = cv2.GaussianBlur(out, (0, 0), r["blur"])
    if r.get("jpeg"):
        ok, buf = cv2.imencode(".jpg", out, [cv2.IMWRITE_JPEG_QUALITY, int(r["jpeg"])])
        out = cv2.imdecode(buf, cv2.IMREAD_COLOR)
    return out


if __name__ == "__main__":
    import sys
    src, dst = sys.argv[1], sys.argv[2]
    cv2.imwrite(dst, toonify(cv2.imread(src, cv2.IMREAD_COLOR)))
