"""Train, export and package a2r_lite, the bundled default model (docs/a2r_lite_training.md).

    python tools/train_a2r_lite.py --out /tmp/cand --resume a2r_edge/models/a2r_lite \
        --steps 1500 --lr 6e-4 --tex 2 --tex-mask 1        # candidate F of docs/a2r_lite_training.md
    python tools/train_a2r_lite.py --out /tmp/try --minutes 8 --tex 0            # quick trial

Pairs: toonify(photo, recipe) -> photo (tools/toonify.py), RECIPES_PER_IMAGE recipes drawn from
a training family (--family: toonify.train_recipe or the wider wide_recipe) per picture, from
the public-domain / CC0 photos bundled in the scikit-image wheel (with --extra-photos 1, also
scikit-learn's and matplotlib's sample photos; nothing is downloaded; with --extra-photos 2,
also the Debian photos tools/fetch_eval_art.py fetched beforehand), minus HELD_OUT (the
evaluation's) and VALIDATION (enhance tuning, model selection), which are never trained on.
Stages (the package format, see tools/a2r_lite_pipeline.py for the exact inference semantics):
  encode  x (1, 3, H, W) in [-1, 1], H, W multiples of 4 -> F (1, 32, H/4, W/4)
  stylize AdaIN(F, target mean/std); training: the statistics of encoder(target photo crop),
          so the decoder learns to decode photo-statistics features; bundled: their average
          over the training photos (photo_stats.json); --stats-map 1: on most steps the
          target is predicted from the toon's own statistics by a linear content map
          (StatsMap), trained with the network and stored in photo_stats.json, as at inference
  decode  F' -> d (1, 3, H, W); the engine adds the input: y = x + d (--gate 1: d is scaled by
          a map in (0, 1) the decoder predicts from its own features, inside decoder.onnx)
  enhance guided filter (not trained; radius/eps/detail tuned by tools/evaluate_a2r_lite.py)
Loss: L1 + GRAD_W x gradient L1 + TEX_W x local high-frequency energy matching (hf_energy_loss:
the output's local RMS of luma high frequencies must match the photo's; no phase alignment
needed, so it asks for texture where the photo has it instead of the L1 optimum, a blur).
CPU only, fixed seeds; with --minutes the learning-rate schedule follows the elapsed time and the step count
reached is recorded in the manifest; `--steps N` runs a step-based schedule, deterministic.
"""
import argparse
import copy
import json
import math
import os
import sys
import time

import cv2
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as Fn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from toonify import toonify, train_recipe, wide_recipe  # noqa: E402
import a2r_lite_pipeline as pipe  # noqa: E402

SEED = 20240611
# Held out: never trained on; the evaluation and the docs pictures use them.
HELD_OUT = ["astronaut", "chelsea", "coffee"]
# Validation: never trained on; picks the enhance stage and the training choices
# (tools/evaluate_a2r_lite.py --tune), so that the held-out photos stay untouched.
VALIDATION = "rocket"
# skimage.data photos in the wheel with an explicit public-domain / CC0 statement in their
# docstrings (skimage/data/_fetchers.py). Left out: stereo_motorcycle (Middlebury, no licence
# stated), lfw_subset (faces, no licence stated), synthetic pictures (logo, colorwheel, text).
TRAIN_PHOTOS = {
    "hubble_deep_field": "public domain (NASA)",
    "immunohistochemistry": "no known copyright restrictions",
    "retina": "CC0 1.0",
    "camera": "CC0 (Lav Varshney), gray",
    "brick": "CC0 (CC0Textures), gray",
    "grass": "CC0 (CC0Textures), gray",
    "gravel": "CC0 (CC0Textures), gray",
    "clock": "public domain (Stefan van der Walt), gray",
    "coins": "no known copyright restrictions, gray",
    "cell": "CC0, gray",
}
# --extra-photos: natural colour photos from two more wheels (pip install scikit-learn
# matplotlib; nothing is downloaded at training time). CC BY 2.0 asks for the credit given here.
EXTRA_PHOTOS = {
    "sklearn:china.jpg": "CC BY 2.0, danielbuechele (Flickr), scikit-learn wheel",
    "sklearn:flower.jpg": "CC BY 2.0, vultilion (Flickr), scikit-learn wheel",
    "matplotlib:grace_hopper.jpg": "public domain (U.S. Navy photo), matplotlib wheel",
}
ART_PHOTO_SIDE = 1024   # --extra-photos 2: the Debian photos' long side at most (INTER_AREA)


def art_photos():
    """{"art:NAME": credit line} of the natural colour photos of tools/fetch_eval_art.py (role
    "photo": public domain, CC0 or CC BY, each file's own licence; its cache must be filled)."""
    import fetch_eval_art
    return {f"art:{c['name']}": f"{c['licence']}, {c['author']}, {c['source'] or c['path']}, "
                                f"Debian {c['package']} {c['version']}"
            for c in fetch_eval_art.credits_list() if c["role"] == "photo"}


def data_note(photos):
    return ("Sample photos bundled in Python wheels (scikit-image 0.26 skimage.data unless "
            "prefixed; \"art:\" ones come from Debian packages by tools/fetch_eval_art.py): "
            + "; ".join(f"{k}: {photos[k]}" for k in photos)
            + ". Colour variants: channel permutations; gray photos tinted by fixed random gains."
            " Toons: recipes drawn from toonify.train_recipe or wide_recipe (runs[].family,"
            " runs[].recipes per picture).")


CROP = 112          # px, multiple of the stride 4; ~100 px crops as in the measured experiment
BATCH = 8
LR = 2e-3           # Adam; cosine decay to LR_MIN over the run
LR_MIN = 5e-5
GRAD_W = 1.0        # weight of the gradient (edge) L1 term next to the pixel L1
TEX_W = 2.0         # weight of the local HF-energy term: 2 beat 0 and 5-6 in the measured runs
                    # (docs/a2r_lite_training.md); no run beat the bundled 0.1.0 on issue #9's targets
HF_SIGMA = 1.5      # high-pass = x - Gaussian(x, 1.5): the evaluation's texture metric
ENERGY_SIGMA = 4.0  # local energy window (Gaussian, ~10 px): texture statistics, not phase
INK_DROP = 0.3      # [-1, 1] units = 38 gray levels: see ink_free()
RECIPES_PER_IMAGE = 3   # toonifier recipes drawn per training picture (memory: uint8 pairs)
LOG_EVERY = 200
LEAK = 0.2          # LeakyRelu slope
ADAIN_EPS = 1e-5
STATS_RIDGE = 1.0   # ridge of the content map's starting fit (fit_stats_map)
ORACLE_P = 0.3      # --stats-map 1: share of steps on the photo's own statistics (style= use)
C1, C2, C3 = 16, 24, 32   # encoder widths at 1, 1/2, 1/4 resolution
D2, D1 = 24, 12           # decoder widths at 1/2 and full resolution (--decoder)
N_ENC_BLOCKS = 2
N_DEC_BLOCKS = 2          # decoder residual blocks at 1/4 resolution (--decoder)


def conv(cin, cout, stride=1):
    return nn.Conv2d(cin, cout, 3, stride, 1)


class ResBlock(nn.Module):
    """x + IN(conv(LReLU(IN(conv(x))))): two 3x3 convs, instance norm (affine)."""

    def __init__(self, c):
        super().__init__()
        self.c1, self.n1 = conv(c, c), nn.InstanceNorm2d(c, affine=True)
        self.c2, self.n2 = conv(c, c), nn.InstanceNorm2d(c, affine=True)

    def forward(self, x):
        h = Fn.leaky_relu(self.n1(self.c1(x)), LEAK)
        return x + self.n2(self.c2(h))


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.c0, self.c1, self.c2 = conv(3, C1), conv(C1, C2, 2), conv(C2, C3, 2)
        self.blocks = nn.Sequential(*[ResBlock(C3) for _ in range(N_ENC_BLOCKS)])

    def forward(self, x):
        h = Fn.leaky_relu(self.c0(x), LEAK)
        h = Fn.leaky_relu(self.c1(h), LEAK)
        h = Fn.leaky_relu(self.c2(h), LEAK)
        return self.blocks(h)


LOWPASS_KERNEL = 8   # chroma low-pass of KeepLowColour: 8x8 tent weights at stride 4 (the
LOWPASS_STRIDE = 4   # model's stride, so sizes are exact), bilinear x4 back: ~8 px cut-off
TENT = (1.0, 2.0, 3.0, 4.0, 4.0, 3.0, 2.0, 1.0)
LUMA_W = (0.299, 0.587, 0.114)


class KeepLowColour(nn.Module):
    """d -> d - (its chroma at scales above ~8 px): the decoder's residual may change luma at
    every scale but chroma only in fine detail (ink, band edges), so the output keeps the input's
    low-frequency colour (issue 22: colour casts on drawings). Fixed weights, executor ops only
    (Conv, Resize linear, Conv). Chroma = (B - Y, R - Y); the back-projection changes R, G, B
    with Y unchanged."""

    def __init__(self):
        super().__init__()
        yr, yg, yb = LUMA_W
        to_c = torch.tensor([[-yr, -yg, 1 - yb], [1 - yr, -yg, -yb]])
        t = torch.tensor(TENT)
        tent = torch.outer(t, t) / t.sum() ** 2
        self.down = nn.Conv2d(3, 2, LOWPASS_KERNEL, LOWPASS_STRIDE,
                              (LOWPASS_KERNEL - LOWPASS_STRIDE) // 2, bias=False)
        self.back = nn.Conv2d(2, 3, 1, bias=False)   # minus the back-projection (Add, no Sub)
        with torch.no_grad():
            self.down.weight.copy_(to_c[:, :, None, None] * tent)
            self.back.weight.copy_(-torch.tensor([[0.0, 1.0], [-yb / yg, -yr / yg], [1.0, 0.0]])
                                   [:, :, None, None])
        for p in self.parameters():
            p.requires_grad_(False)

    def forward(self, d):
        low = Fn.interpolate(self.down(d), scale_factor=float(LOWPASS_STRIDE), mode="bilinear",
                             align_corners=False)
        return d + self.back(low)


GATE_W = 16       # width of the residual gate's branch (1/4 resolution, --gate)
GATE_INIT = 4.0   # its starting logit: sigmoid(4) = 0.98, the ungated residual nearly whole


class Decoder(nn.Module):
    """upsample "shuffle": conv to 4x channels + PixelShuffle(2) (0.1.0-0.3.0: its sub-pixel
    phases learn different biases and leave a period-2/4 grid, issue 22); "linear": bilinear x2
    then conv (every output pixel made by the same weights: no phase pattern).
    gate: the residual is multiplied by a map g in (0, 1) predicted from the decoder blocks'
    features (two 3x3 convs at 1/4 resolution, bilinear x4, sigmoid): the network's own
    drawing-or-toon signal, so that it can leave a drawing's lines alone (g -> 0) and still
    convert a toon (g -> 1) without one set of filters doing both (issue 22). gate 2 adds to
    the logit a 1x1 conv of the gate features' mean over the picture (starting at 0): a
    whole-picture vote beside the 93 px local view."""

    def __init__(self, blocks=N_DEC_BLOCKS, d2=D2, d1=D1, upsample="shuffle", keep_colour=False,
                 gate=False):
        super().__init__()
        self.upsample = upsample
        k = 1 if upsample == "linear" else 4
        self.blocks = nn.Sequential(*[ResBlock(C3) for _ in range(blocks)])
        self.u1 = conv(C3, d2 * k)     # -> d2 @ 1/2
        self.u2 = conv(d2, d1 * k)     # -> d1 @ full resolution
        self.out = conv(d1, 3)
        self.keep = KeepLowColour() if keep_colour else None
        nn.init.zeros_(self.out.weight)   # start as the identity y = x
        nn.init.zeros_(self.out.bias)
        self.gate = self.gate_global = None
        if gate:
            self.gate = nn.Sequential(conv(C3, GATE_W), nn.LeakyReLU(LEAK), conv(GATE_W, 1))
            nn.init.zeros_(self.gate[2].weight)
            nn.init.constant_(self.gate[2].bias, GATE_INIT)
        if gate == 2:
            self.gate_global = nn.Conv2d(GATE_W, 1, 1)
            nn.init.zeros_(self.gate_global.weight)
            nn.init.zeros_(self.gate_global.bias)

    def up(self, conv_layer, h):
        if self.upsample == "shuffle":
            return Fn.pixel_shuffle(conv_layer(h), 2)
        return conv_layer(Fn.interpolate(h, scale_factor=2.0, mode="bilinear", align_corners=False))

    def forward(self, f, with_gate=False):
        """The residual d (N, 3, H, W); with_gate: (d, g), g (N, 1, H, W) or None."""
        b = self.blocks(f)
        h = Fn.leaky_relu(self.up(self.u1, b), LEAK)
        h = Fn.leaky_relu(self.up(self.u2, h), LEAK)
        d = self.out(h)
        d = d if self.keep is None else self.keep(d)
        g = None
        if self.gate is not None:
            feat = self.gate[1](self.gate[0](b))
            logit = self.gate[2](feat)
            if self.gate_global is not None:
                logit = logit + self.gate_global(feat.mean((2, 3), keepdim=True))
            g = torch.sigmoid(Fn.interpolate(logit, scale_factor=4.0, mode="bilinear",
                                             align_corners=False))
            d = d * g
        return (d, g) if with_gate else d


def shuffle_to_linear(sd):
    """A pixel-shuffle decoder's state_dict -> the "linear" decoder's start: each sub-pixel conv's
    4 phase filters (PixelShuffle CRD: output channel c takes input channels 4c .. 4c+3) averaged
    into one, so the new decoder starts near the old one's phase-averaged output."""
    out = dict(sd)
    for name in ("u1", "u2"):
        w, b = sd[f"{name}.weight"], sd[f"{name}.bias"]
        out[f"{name}.weight"] = w.reshape(w.shape[0] // 4, 4, *w.shape[1:]).mean(1)
        out[f"{name}.bias"] = b.reshape(-1, 4).mean(1)
    return out


def conv_path(dec_blocks=N_DEC_BLOCKS, upsample="shuffle", keep_colour=False):
    """(kernel, stride, upscale) of every layer on the longest path (each residual block's two
    convs; a bilinear x2 counts as a 2-tap layer at the lower resolution), the global
    instance-norm statistics aside."""
    up = ([(3, 1, 2)] if upsample == "shuffle" else [(2, 1, 2), (3, 1, 1)]) * 2
    keep = [(LOWPASS_KERNEL, LOWPASS_STRIDE, 1), (2, 1, LOWPASS_STRIDE)] if keep_colour else []
    return ([(3, 1, 1), (3, 2, 1), (3, 2, 1)] + [(3, 1, 1)] * (2 * N_ENC_BLOCKS)
            + [(3, 1, 1)] * (2 * dec_blocks) + up + [(3, 1, 1)] + keep)


def gate_path(dec_blocks=N_DEC_BLOCKS):
    """conv_path of the gate branch (--gate): the encoder and decoder blocks, two 3x3 convs at
    1/4 resolution, a bilinear x4 (2 taps at 1/4 resolution)."""
    return ([(3, 1, 1), (3, 2, 1), (3, 2, 1)] + [(3, 1, 1)] * (2 * N_ENC_BLOCKS)
            + [(3, 1, 1)] * (2 * dec_blocks) + [(3, 1, 1), (3, 1, 1), (2, 1, 4)])


def receptive_field(layers):
    """Input-pixel extent of one output pixel: rf += (k-1)*jump, jump *= stride, jump /= upscale
    after the layer."""
    rf, jump = 1.0, 1.0
    for k, s, up in layers:
        rf += (k - 1) * jump
        jump = jump * s / up
    return int(math.ceil(rf))


def count_gflops(enc, dec, size=512):
    """Multiply-adds x 2 of every Conv at size x size (norms and activations not counted)."""
    flops = []

    def hook(m, inp, out):
        k = m.kernel_size[0] * m.kernel_size[1] * m.in_channels // m.groups
        flops.append(2 * k * out.numel())
    hs = [m.register_forward_hook(hook) for m in list(enc.modules()) + list(dec.modules())
          if isinstance(m, nn.Conv2d)]
    with torch.no_grad():
        dec(enc(torch.zeros(1, 3, size, size)))
    for h in hs:
        h.remove()
    return sum(flops) / 1e9


def adain(f, mean, std, eps=ADAIN_EPS):
    mu = f.mean((2, 3), keepdim=True)
    var = f.var((2, 3), keepdim=True, unbiased=False)
    return (f - mu) / torch.sqrt(var + eps) * std + mean


def channel_stats(f, eps=ADAIN_EPS):
    return f.mean((2, 3), keepdim=True), torch.sqrt(f.var((2, 3), keepdim=True, unbiased=False) + eps)


def log_stats(m, s):
    """(N, C, 1, 1) mean and std -> (N, 2C) [mean, ln std]: the content map's coordinates."""
    return torch.cat([m.flatten(1), torch.log(s).flatten(1)], 1)


class StatsMap(nn.Module):
    """Target AdaIN statistics predicted from the toon's own (--stats-map 1): z = W [mean; ln std]
    + b over the 2C channel statistics, target mean = z[:C], std = exp(z[C:]). The package stores
    W and b as photo_stats.json "content_map"; the AdaIN stage applies them at inference."""

    def __init__(self, c=C3):
        super().__init__()
        self.lin = nn.Linear(2 * c, 2 * c)

    def forward(self, m, s):
        n, c = m.shape[:2]
        z = self.lin(log_stats(m, s))
        return z[:, :c].reshape(n, c, 1, 1), torch.exp(z[:, c:]).reshape(n, c, 1, 1)


def fit_stats_map(smap, enc, pairs, ridge=STATS_RIDGE):
    """Starts the map at the ridge-regression fit of [photo stats] on [toon stats] (encoder
    statistics of every whole training pair), so that fine-tuning starts from useful targets."""
    xs, ys = [], []
    with torch.no_grad():
        for toon, photo in pairs:
            t = torch.from_numpy(pipe.pad_to(pipe.to_unit(toon)[None], 4, pipe.BORDER_MARGIN))
            p = torch.from_numpy(pipe.pad_to(pipe.to_unit(photo)[None], 4, pipe.BORDER_MARGIN))
            xs.append(log_stats(*channel_stats(enc(t))))
            ys.append(log_stats(*channel_stats(enc(p))))
        x = torch.cat([torch.cat(xs).double(), torch.ones(len(xs), 1, dtype=torch.float64)], 1)
        y = torch.cat(ys).double()
        w = torch.linalg.solve(x.T @ x + ridge * torch.eye(x.shape[1], dtype=torch.float64), x.T @ y)
        smap.lin.weight.copy_(w[:-1].T.float())
        smap.lin.bias.copy_(w[-1].float())


def load_photo(name):
    """RGB uint8 (H, W, 3) from a wheel: skimage.data (never downloads these), or
    "sklearn:FILE" / "matplotlib:FILE" for their bundled sample pictures, or "art:NAME" from
    tools/fetch_eval_art.py's cache (scaled to ART_PHOTO_SIDE at most)."""
    if name.startswith("art:"):
        import fetch_eval_art
        img = fetch_eval_art.load_picture(name[4:])[1][..., ::-1]
        k = ART_PHOTO_SIDE / max(img.shape[:2])
        if k < 1:
            img = cv2.resize(img, (round(img.shape[1] * k), round(img.shape[0] * k)),
                             interpolation=cv2.INTER_AREA)
    elif name.startswith("sklearn:"):
        from sklearn.datasets import load_sample_image
        img = load_sample_image(name.split(":", 1)[1])
    elif name.startswith("matplotlib:"):
        import matplotlib.cbook as cbook
        path = cbook.get_sample_data(name.split(":", 1)[1], asfileobj=False)
        img = cv2.imread(str(path), cv2.IMREAD_COLOR)[..., ::-1]
    else:
        import skimage.data as sd
        img = getattr(sd, name)()
    if img.ndim == 2:
        img = np.repeat(img[..., None], 3, 2)
    return np.ascontiguousarray(img[..., :3])


def to_bgr(rgb):
    return np.ascontiguousarray(rgb[..., ::-1])


FAMILIES = {"base": train_recipe, "wide": wide_recipe}   # toonify's training families


def build_pairs(rng, photos, n_recipes=RECIPES_PER_IMAGE, family="base", originals=None):
    """List of (toon, photo) uint8 RGB HWC: each training photo at scales 1 and 1/2 (and 1/4
    above 900 px), plus colour variants (photo recoloured BEFORE toonify), each toonified by
    n_recipes recipes drawn from the training family (FAMILIES)."""
    draw = FAMILIES[family]
    pairs = []
    for name in photos:
        base = originals[name] if originals is not None else load_photo(name)
        gray = bool(np.all(base[..., 0] == base[..., 1]))
        variants = [base]
        if gray:   # tints: per-channel gains, so gray photos also teach colour
            for _ in range(2):
                g = rng.uniform(0.55, 1.0, 3)
                variants.append(np.clip(base * g, 0, 255).astype(np.uint8))
        else:
            variants += [base[..., [1, 2, 0]].copy(), base[..., [2, 0, 1]].copy()]
        for v in variants:
            h, w = v.shape[:2]
            for s in (1.0, 0.5, 0.25):
                if s < 0.5 and max(h, w) < 900:
                    continue
                im = v if s == 1.0 else cv2.resize(v, (int(w * s), int(h * s)),
                                                   interpolation=cv2.INTER_AREA)
                if min(im.shape[:2]) < CROP:
                    continue
                for _ in range(n_recipes):
                    toon = toonify(to_bgr(im), draw(rng))[..., ::-1]
                    pairs.append((np.ascontiguousarray(toon), np.ascontiguousarray(im)))
    return pairs


def sample_batch(pairs, rng, weights):
    xs, ys = [], []
    for _ in range(BATCH):
        t, p = pairs[rng.choice(len(pairs), p=weights)]
        h, w = t.shape[:2]
        i, j = rng.randint(0, h - CROP + 1), rng.randint(0, w - CROP + 1)
        a = pipe.to_unit(t[i:i + CROP, j:j + CROP])
        b = pipe.to_unit(p[i:i + CROP, j:j + CROP])
        if rng.rand() < 0.5:
            a, b = a[:, :, ::-1], b[:, :, ::-1]
        if rng.rand() < 0.5:
            a, b = a[:, ::-1], b[:, ::-1]
        xs.append(a.copy())
        ys.append(b.copy())
    return torch.from_numpy(np.stack(xs)), torch.from_numpy(np.stack(ys))


def grad_l1(a, b):
    dx = lambda t: t[..., :, 1:] - t[..., :, :-1]  # noqa: E731
    dy = lambda t: t[..., 1:, :] - t[..., :-1, :]  # noqa: E731
    return (dx(a) - dx(b)).abs().mean() + (dy(a) - dy(b)).abs().mean()


def _gauss_kernel(sigma):
    r = int(math.ceil(3 * sigma))
    k = torch.exp(-torch.arange(-r, r + 1, dtype=torch.float32) ** 2 / (2 * sigma * sigma))
    return k / k.sum()


def gauss(t, sigma):
    """Separable Gaussian blur of (N, 1, H, W), reflect borders (as the metric's OpenCV blur)."""
    k = _gauss_kernel(sigma).to(t.device)
    r = (len(k) - 1) // 2
    t = Fn.conv2d(Fn.pad(t, (r, r, 0, 0), mode="reflect"), k.view(1, 1, 1, -1))
    return Fn.conv2d(Fn.pad(t, (0, 0, r, r), mode="reflect"), k.view(1, 1, -1, 1))


def luma(t):
    return 0.299 * t[:, 0:1] + 0.587 * t[:, 1:2] + 0.114 * t[:, 2:3]


def local_hf_rms(t, w=None):
    """Local RMS of the luma's high frequencies: sqrt(G_4 * (g - G_1.5 * g)^2); with a mask w,
    the average runs over the pixels where w = 1 only: G_4 * (w hf^2) / G_4 * w."""
    g = luma(t)
    hf = g - gauss(g, HF_SIGMA)
    if w is None:
        return torch.sqrt(gauss(hf * hf, ENERGY_SIGMA) + 1e-6)
    return torch.sqrt(gauss(w * hf * hf, ENERGY_SIGMA) / (gauss(w, ENERGY_SIGMA) + 1e-3) + 1e-6)


def ink_free(toon, photo):
    """1 where the toon has no ink nearby, else 0: ink = toon luma darker than the photo's by
    INK_DROP (~38 gray levels: line art, not a colour band), grown by 1 px. Without this mask
    the energy term rewards leftover ink lines as 'texture' (measured: docs/a2r_lite_training.md)."""
    ink = (luma(photo) - luma(toon) > INK_DROP).float()
    return 1.0 - Fn.max_pool2d(ink, 3, 1, 1)


def hf_energy_loss(out, photo, weight=None):
    """L1 between local HF RMS maps: rewards as much fine detail as the photo, where the
    photo has it, whatever its phase. weight (N, 1, H, W): only those pixels' energy is
    compared (both maps average over them), so energy at the toon's ink is neither wanted
    nor rewarded."""
    d = (local_hf_rms(out, weight) - local_hf_rms(photo, weight)).abs()
    if weight is None:
        return d.mean()
    return (d * weight).sum() / weight.sum().clamp_min(1.0)


DRAW_SIGMA = 2.0    # px: the drawings' colour and tone are kept above this scale
DRAW_SCALES = (1.0, 0.5)   # --draw-scales: 0.25 and 0.125 bring the sprites to icon size
DRAW_MIN_ALPHA = 0.25   # a drawing crop must be at least this opaque (sprites on white)


def load_drawings(scales=DRAW_SCALES):
    """[(rgb uint8, alpha float32 in [0, 1]), ...] at `scales`, and the credits: the
    licence-clean drawings of tools/fetch_eval_art.py (role "train"; its cache must be filled).
    A drawing scaled below the crop is centred on white (transparent), as a small sprite is
    shown; a background scaled so is left out (a white frame is not part of it)."""
    import fetch_eval_art
    out, credits = [], []
    for name, bgr, alpha, credit in fetch_eval_art.load_set("train"):
        a = np.ones(bgr.shape[:2], np.float32) if alpha is None else alpha.astype(np.float32) / 255
        for sc in scales:
            h, w = bgr.shape[:2]
            size = (int(w * sc), int(h * sc))
            im = bgr if sc == 1.0 else cv2.resize(bgr, size, interpolation=cv2.INTER_AREA)
            aa = a if sc == 1.0 else cv2.resize(a, size, interpolation=cv2.INTER_AREA)
            if min(im.shape[:2]) < CROP:
                if alpha is None:
                    continue
                ph, pw = max(CROP - im.shape[0], 0), max(CROP - im.shape[1], 0)
                pads = ((ph // 2, ph - ph // 2), (pw // 2, pw - pw // 2))
                im = np.pad(im, pads + ((0, 0),), constant_values=255)
                aa = np.pad(aa, pads, constant_values=0)
            out.append((np.ascontiguousarray(im[..., ::-1]), aa))
        credits.append(f"{name}: {credit['licence']}, {credit['package']} {credit['version']} "
                       f"{credit['path']}")
    return out, credits


def sample_drawings(drawings, rng, photos=None, photo_share=0.0):
    """BATCH random crops of the drawings (flipped at random), mostly opaque ones; with
    `photo_share` > 0 each crop is, with that probability, one of `photos` (RGB uint8,
    untoonified: a picture already photographic, which the network must leave as it is)."""
    xs = []
    while len(xs) < BATCH:
        if photo_share and rng.rand() < photo_share:
            img = photos[rng.randint(len(photos))]
            a = np.ones(img.shape[:2], np.float32)
        else:
            img, a = drawings[rng.randint(len(drawings))]
        h, w = img.shape[:2]
        for _ in range(10):
            i, j = rng.randint(0, h - CROP + 1), rng.randint(0, w - CROP + 1)
            if a[i:i + CROP, j:j + CROP].mean() >= DRAW_MIN_ALPHA:
                break
        c = pipe.to_unit(img[i:i + CROP, j:j + CROP])
        if rng.rand() < 0.5:
            c = c[:, :, ::-1]
        xs.append(c.copy())
    return torch.from_numpy(np.stack(xs))


def drawing_loss(out, x, lost=0.0):
    """Preservation on real drawings (no paired photo exists): L1 of the Gaussian(DRAW_SIGMA)
    low-pass of every channel (colour, tone, contrast kept) + the local high-frequency energy
    the output ADDS over the input's (halos, ghost lines, grids: energy the drawing does not
    have) + `lost` x the energy it REMOVES (faded lines, flattened sprites; 0: free, which lets
    one ungated network remove a toon's ink where a drawing looks alike)."""
    n, c, h, w = out.shape
    low = lambda t: gauss(t.reshape(n * c, 1, h, w), DRAW_SIGMA)  # noqa: E731
    keep = (low(out) - low(x)).abs().mean()
    diff = local_hf_rms(out) - local_hf_rms(x)
    return keep + Fn.relu(diff).mean() + (lost * Fn.relu(-diff).mean() if lost else 0.0)


def start_gate(start, x, m, s):
    """The gate map of the resumed network (`start`: frozen copies of its encoder and decoder)
    on the crops x at the AdaIN statistics m, s: --gate-keep's reference."""
    enc0, dec0 = start
    with torch.no_grad():
        return dec0(adain(enc0(x), m.detach(), s.detach()), with_gate=True)[1]


GRID_PERIOD = 4      # px: the pixel shuffles' pattern repeats every 2 or 4 pixels


def phase_pattern(d):
    """RMS of the fixed-phase period-GRID_PERIOD pattern of a residual d (N, C, H, W): the mean
    of d at each phase (y mod 4, x mod 4) over the crop, less their mean. A sub-pixel layer's
    grid is exactly such a pattern; picture content averages out over the crop's 784 samples
    per phase (112 px crops)."""
    n, c, h, w = d.shape
    p = GRID_PERIOD
    t = d[..., :h - h % p, :w - w % p].reshape(n, c, h // p, p, w // p, p).mean((2, 4))
    return torch.sqrt((t - t.mean((2, 3), keepdim=True)).pow(2).mean() + 1e-10)


def save_sources(path, originals, drawings, credits, scales=DRAW_SCALES):
    """The source pictures (training photos by name, drawings with alpha at `scales`, their
    credits) in one npz, so that a machine without the wheels or the Debian cache (a GPU box)
    builds the same pairs: build_pairs draws the same recipes from the same seed."""
    arrays = {"credits": np.array(json.dumps(credits)),
              "names": np.array(json.dumps(list(originals))),
              "draw_scales": np.array(scales, np.float64)}
    for i, img in enumerate(originals.values()):
        arrays[f"o{i}"] = img
    for i, (d, a) in enumerate(drawings):
        arrays[f"d{i}"], arrays[f"a{i}"] = d, (a * 255).astype(np.uint8)
    np.savez_compressed(path, **arrays)


def load_sources(path):
    """save_sources' (originals, drawings, credits, the drawings' scales)."""
    z = np.load(path)
    names = json.loads(str(z["names"]))
    m = sum(1 for k in z.files if k[0] == "d" and k[1:].isdigit())
    scales = tuple(z["draw_scales"].tolist()) if "draw_scales" in z.files else DRAW_SCALES
    return ({n: z[f"o{i}"] for i, n in enumerate(names)},
            [(z[f"d{i}"], z[f"a{i}"].astype(np.float32) / 255) for i in range(m)],
            json.loads(str(z["credits"])), scales)


def export(enc, dec, out_dir):
    enc.eval()
    dec.eval()
    x = torch.zeros(1, 3, 64, 64)
    f = enc(x)
    kw = dict(opset_version=17, dynamo=False, do_constant_folding=True)
    torch.onnx.export(enc, (x,), os.path.join(out_dir, "encoder.onnx"), input_names=["x"],
                      output_names=["f"], dynamic_axes={"x": {2: "h", 3: "w"},
                                                        "f": {2: "h4", 3: "w4"}}, **kw)
    torch.onnx.export(dec, (f,), os.path.join(out_dir, "decoder.onnx"), input_names=["f"],
                      output_names=["d"], dynamic_axes={"f": {2: "h4", 3: "w4"},
                                                        "d": {2: "h", 3: "w"}}, **kw)
    for name in ("encoder.onnx", "decoder.onnx"):
        pipe.check_ops(os.path.join(out_dir, name))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="a2r_edge/models/a2r_lite")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--minutes", type=float, default=None, help="training time budget")
    g.add_argument("--steps", type=int, default=None, help="exact step count (replay)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--resume", default=None,
                    help="package folder whose encoder/decoder.onnx weights start this run")
    ap.add_argument("--lr", type=float, default=LR, help="peak learning rate of the cosine")
    ap.add_argument("--tex", type=float, default=TEX_W, help="weight of the HF-energy term")
    ap.add_argument("--tex-mask", type=int, default=1,
                    help="1: the HF-energy term ignores pixels near the toon's ink")
    ap.add_argument("--ink-weight", type=float, default=1.0,
                    help="weight of the toon's ink pixels (ink_free) in the L1 term")
    ap.add_argument("--recipes", type=int, default=RECIPES_PER_IMAGE,
                    help="toonifier recipes per training picture")
    ap.add_argument("--extra-photos", type=int, default=0,
                    help="1: also train on EXTRA_PHOTOS (needs scikit-learn and matplotlib); "
                         "2: and on the photos of tools/fetch_eval_art.py (role 'photo')")
    ap.add_argument("--version", default="0.0.0-dev", help="the package's version")
    ap.add_argument("--family", choices=sorted(FAMILIES), default="base",
                    help="toonifier recipe family: toonify.train_recipe or toonify.wide_recipe")
    ap.add_argument("--stats-map", type=int, default=0,
                    help="1: the AdaIN target statistics are predicted from the toon's own "
                         "(StatsMap, stored in photo_stats.json) instead of fixed")
    ap.add_argument("--upsample", choices=("shuffle", "linear"), default=None,
                    help="decoder upsampling: PixelShuffle (0.1.0-0.3.0) or bilinear x2 + conv; "
                         "a --resume run keeps the package's unless given (shuffle -> linear "
                         "converts the weights: shuffle_to_linear)")
    ap.add_argument("--keep-colour", type=int, default=None,
                    help="1: the decoder's residual keeps the input's low-frequency chroma "
                         "(KeepLowColour); a --resume run keeps the package's unless given")
    ap.add_argument("--drawings", type=float, default=0.0,
                    help="weight of the preservation loss on real drawings (licence-clean "
                         "ones: tools/fetch_eval_art.py's 'train' role): drawing_loss")
    ap.add_argument("--draw-lost", type=float, default=0.0,
                    help="weight of the high-frequency energy the output removes from a drawing "
                         "(drawing_loss; default 0: removing is free)")
    ap.add_argument("--photos-kept", type=float, default=0.0,
                    help="share of the preservation batch (--drawings) taken from the training "
                         "photos untoonified: kept as they are, their gate towards 0 (default 0)")
    ap.add_argument("--draw-scales", type=lambda v: tuple(float(x) for x in v.split(",")),
                    default=DRAW_SCALES, help="scales of the training drawings, comma-separated "
                                              f"(default {','.join(map(str, DRAW_SCALES))})")
    ap.add_argument("--grid", type=float, default=0.0,
                    help="weight of the fixed-phase pattern penalty on the residual "
                         "(phase_pattern), toons and drawings")
    ap.add_argument("--gate", type=int, choices=(0, 1, 2), default=None,
                    help="1: the residual is multiplied by a gate map predicted from the picture "
                         "(Decoder gate); 2: with a whole-picture term; a --resume run keeps the "
                         "package's unless given (a gate added to a package starts at "
                         "sigmoid(GATE_INIT), its whole-picture term at 0)")
    ap.add_argument("--gate-bce", type=float, default=0.0,
                    help="weight of the gate's binary cross-entropy: 1 on the toons, 0 on the "
                         "drawings (needs --drawings)")
    ap.add_argument("--freeze", type=int, choices=(0, 1, 2), default=0,
                    help="1: only the gate trains (encoder, decoder, content map frozen), so the "
                         "resumed package's conversion is kept wherever the gate is 1; 2: only the "
                         "decoder's upsampling head trains (u1, u2, out), so the gate map, "
                         "computed before it, stays the resumed package's")
    ap.add_argument("--gate-keep", type=float, default=0.0,
                    help="weight of the mean |gate map - the resumed network's| on the toon and "
                         "drawing crops, so that the network trains while where the gate opens "
                         "stays near the resumed package's (needs --resume and a gate)")
    ap.add_argument("--save-every", type=int, default=0,
                    help="also write a package every N steps to OUT/stepNNNNN (an early stop "
                         "still leaves candidates)")
    ap.add_argument("--device", default="cpu", help="torch device (cpu, cuda)")
    ap.add_argument("--data-cache", default=None,
                    help="npz of the source pictures (photos, drawings): read if it exists, "
                         "else written (save_sources)")
    ap.add_argument("--decoder", default=None,
                    help="BLOCKS,D2,D1: decoder residual blocks at 1/4 resolution and widths "
                         f"at 1/2 and full resolution (default {N_DEC_BLOCKS},{D2},{D1}; "
                         "a --resume run keeps the package's)")
    args = ap.parse_args()
    if not args.ink_weight > 0:
        ap.error(f"--ink-weight must be > 0, got {args.ink_weight:g}")
    if args.resume and args.decoder:
        ap.error("--decoder: a --resume run keeps the decoder of the package it resumes")
    try:
        decoder = [int(v) for v in (args.decoder or f"{N_DEC_BLOCKS},{D2},{D1}").split(",")]
    except ValueError:
        decoder = []
    if len(decoder) != 3 or min(decoder) < 1:
        ap.error(f"--decoder must be three positive integers BLOCKS,D2,D1, got {args.decoder!r}")
    if not 0.0 <= args.photos_kept < 1.0 or (args.photos_kept and not args.drawings > 0):
        ap.error("--photos-kept must be in [0, 1) and needs --drawings (its batch)")
    if args.gate_bce > 0 and not args.drawings > 0:
        ap.error("--gate-bce needs --drawings (the gate's 0 class)")
    if args.minutes is None and args.steps is None:
        ap.error("give --steps N (a reproducible schedule) or --minutes M (a trial)")

    torch.manual_seed(SEED)
    rng = np.random.RandomState(SEED)
    torch.set_num_threads(args.threads)
    os.makedirs(args.out, exist_ok=True)

    t0 = time.time()
    art = art_photos() if args.extra_photos >= 2 else {}
    if args.extra_photos >= 2 and not art:
        ap.error("--extra-photos 2: no photos in the cache (run tools/fetch_eval_art.py)")
    photos = dict(TRAIN_PHOTOS, **(EXTRA_PHOTOS if args.extra_photos else {}), **art)
    if args.data_cache and os.path.exists(args.data_cache):
        originals, drawings, draw_credits, scales = load_sources(args.data_cache)
        missing = set(photos) - set(originals)
        if missing:
            ap.error(f"--data-cache {args.data_cache} lacks {sorted(missing)}")
        if drawings and scales != args.draw_scales:
            ap.error(f"--data-cache {args.data_cache} holds the drawings at scales {scales}, "
                     f"not --draw-scales {args.draw_scales}: give another cache file")
    else:
        originals = {name: load_photo(name) for name in photos}
        drawings, draw_credits = (load_drawings(args.draw_scales) if args.drawings > 0
                                  else ([], []))
        if args.data_cache:
            save_sources(args.data_cache, originals, drawings, draw_credits, args.draw_scales)
    pairs = build_pairs(rng, photos, args.recipes, args.family, originals)
    if args.drawings > 0 and not drawings:
        ap.error("--drawings: no drawings (run tools/fetch_eval_art.py, or a cache built "
                 "without --drawings)")
    kept = [originals[name] for name in photos if min(originals[name].shape[:2]) >= CROP]
    if args.photos_kept and not kept:
        ap.error(f"--photos-kept: no training photo is at least {CROP} px a side")
    areas = np.array([t.shape[0] * t.shape[1] for t, _ in pairs], np.float64)
    weights = np.sqrt(areas) / np.sqrt(areas).sum()   # big photos more often, not dominant
    print(f"{len(pairs)} training pairs built in {time.time() - t0:.1f} s", flush=True)

    prev = None
    if args.resume:
        with open(os.path.join(args.resume, "manifest.json")) as fh:
            prev = json.load(fh)["training"]
        decoder = prev.get("decoder", [N_DEC_BLOCKS, D2, D1])   # 0.1.0 predates the field
    old_upsample = prev.get("upsample", "shuffle") if prev else None
    upsample = args.upsample or old_upsample or "shuffle"
    keep_colour = bool(args.keep_colour if args.keep_colour is not None
                       else (prev or {}).get("keep_colour", 0))
    gate = int(args.gate if args.gate is not None else (prev or {}).get("gate", 0))
    if args.freeze and not gate:
        ap.error("--freeze needs a gate: give --gate 1 or 2")
    if args.gate_keep and not (gate and args.resume):
        ap.error("--gate-keep needs --resume and a gate (--gate 1 or 2)")
    enc, dec = Encoder(), Decoder(*decoder, upsample=upsample, keep_colour=keep_colour, gate=gate)
    params = sum(p.numel() for p in list(enc.parameters()) + list(dec.parameters())
                 if p.requires_grad)
    gflops = count_gflops(enc, dec)
    rf = max(receptive_field(conv_path(decoder[0], upsample, keep_colour)),
             receptive_field(gate_path(decoder[0])) if gate else 0)
    print(f"params {params}, {gflops:.3f} GFLOP per 512x512 frame, receptive field {rf} px",
          flush=True)
    prev_runs = []
    if args.resume:   # ONNX initializer names are the state_dict names (see export())
        import onnx
        from onnx import numpy_helper
        for mod, name in ((enc, "encoder.onnx"), (dec, "decoder.onnx")):
            g = onnx.load(os.path.join(args.resume, name)).graph
            sd = {i.name: torch.from_numpy(numpy_helper.to_array(i).copy()) for i in g.initializer}
            if mod is dec:
                if old_upsample == "shuffle" and upsample == "linear":
                    sd = shuffle_to_linear(sd)
                sd = {k: v for k, v in sd.items() if not k.startswith("keep.")}
                if dec.keep is not None:   # fixed weights: always the module's own
                    sd.update({f"keep.{k}": v for k, v in dec.keep.state_dict().items()})
                for name in ("gate", "gate_global"):
                    part = getattr(dec, name)
                    if part is None:
                        sd = {k: v for k, v in sd.items() if not k.startswith(name + ".")}
                    else:   # a gate added now starts at its initial state
                        for k, v in part.state_dict().items():
                            sd.setdefault(f"{name}.{k}", v)
            mod.load_state_dict(sd, strict=True)
        prev_runs = prev.get("runs", [{"steps": prev["steps"], "minutes": prev["minutes"],
                                       "lr": LR}])
        print(f"resumed from {args.resume} after {sum(r['steps'] for r in prev_runs)} steps")
    smap = StatsMap() if args.stats_map else None
    if smap is not None:
        old_map = None
        if args.resume:
            with open(os.path.join(args.resume, "photo_stats.json")) as fh:
                old_map = json.load(fh).get("content_map")
        if old_map is not None:
            smap.lin.weight.data = torch.tensor(old_map["weight"], dtype=torch.float32)
            smap.lin.bias.data = torch.tensor(old_map["bias"], dtype=torch.float32)
        else:
            t_fit = time.time()
            fit_stats_map(smap, enc, pairs)
            print(f"content map fitted in {time.time() - t_fit:.1f} s", flush=True)
    dev = torch.device(args.device)
    enc, dec = enc.to(dev), dec.to(dev)
    smap = smap.to(dev) if smap is not None else None
    start = ((copy.deepcopy(enc).eval().requires_grad_(False),
              copy.deepcopy(dec).eval().requires_grad_(False)) if args.gate_keep else None)
    fixed_stats = None
    if args.drawings > 0 and smap is None:   # the package's fixed target, as at inference
        with open(os.path.join(args.resume, "photo_stats.json")) as fh:
            js = json.load(fh)
        fixed_stats = (js["mean"], js["std"])
    trained = ([p for m in (dec.gate, dec.gate_global) if m is not None for p in m.parameters()]
               if args.freeze == 1 else
               [p for m in (dec.u1, dec.u2, dec.out) for p in m.parameters()]
               if args.freeze == 2 else
               [p for p in list(enc.parameters()) + list(dec.parameters())
                + (list(smap.parameters()) if smap is not None else []) if p.requires_grad])
    for p in list(enc.parameters()) + list(dec.parameters()) + (
            list(smap.parameters()) if smap is not None else []):
        p.requires_grad_(False)
    for p in trained:
        p.requires_grad_(True)
    opt = torch.optim.Adam(trained, lr=args.lr)
    enhance = None   # a new folder gets the resumed package's enhance stage
    if args.resume and not os.path.exists(os.path.join(args.out, "manifest.json")):
        with open(os.path.join(args.resume, "manifest.json")) as fh:
            enhance = next((dict(st) for st in json.load(fh)["stages"]
                            if st["kind"] == "guided_filter"), None)

    def write_package(out_dir, total, train_s):
        """The package of the network as it is after `total` steps, into out_dir."""
        os.makedirs(out_dir, exist_ok=True)
        e, dc = copy.deepcopy(enc).cpu(), copy.deepcopy(dec).cpu()
        sm = copy.deepcopy(smap).cpu() if smap is not None else None
        torch.save({"enc": e.state_dict(), "dec": dc.state_dict(),
                    "smap": sm.state_dict() if sm is not None else None},
                   os.path.join(out_dir, "state.pt"))   # kept if the export below fails
        export(e, dc, out_dir)
        os.remove(os.path.join(out_dir, "state.pt"))
        # Bundled statistics: average over the training photos (scale 1, original colours) of
        # encoder(photo) per-channel mean and sqrt(var + eps).
        means, stds = [], []
        with torch.no_grad():
            for img in (originals[name] for name in photos):
                p = pipe.pad_to(pipe.to_unit(img)[None], 4, pipe.BORDER_MARGIN)
                mm, ss = channel_stats(e(torch.from_numpy(p)))
                means.append(mm.flatten().numpy())
                stds.append(ss.flatten().numpy())
        stats = {"mean": [float(v) for v in np.mean(means, 0)],
                 "std": [float(v) for v in np.mean(stds, 0)]}
        if sm is not None:
            stats["content_map"] = {"weight": sm.lin.weight.detach().tolist(),
                                    "bias": sm.lin.bias.detach().tolist()}
        with open(os.path.join(out_dir, "photo_stats.json"), "w") as fh:
            json.dump(stats, fh, indent=1)
        command = (f"python tools/train_a2r_lite.py --out a2r_edge/models/a2r_lite --steps {total} "
                   f"--threads {args.threads} --lr {args.lr:g} --tex {args.tex:g} --tex-mask {args.tex_mask} "
                   f"--recipes {args.recipes} --family {args.family} "
                   f"--extra-photos {args.extra_photos} --stats-map {args.stats_map} "
                   + (f"--ink-weight {args.ink_weight:g} " if args.ink_weight != 1.0 else "")
                   + f"--upsample {upsample} --keep-colour {int(keep_colour)} "
                   + (f"--drawings {args.drawings:g} " if args.drawings > 0 else "")
                   + (f"--draw-lost {args.draw_lost:g} " if args.draw_lost else "")
                   + (f"--photos-kept {args.photos_kept:g} " if args.photos_kept else "")
                   + (f"--draw-scales {','.join(f'{v:g}' for v in args.draw_scales)} "
                      if args.drawings > 0 and args.draw_scales != DRAW_SCALES else "")
                   + (f"--grid {args.grid:g} " if args.grid > 0 else "")
                   + (f"--gate {gate} --gate-bce {args.gate_bce:g} --freeze {args.freeze} " if gate
                      else "")
                   + (f"--gate-keep {args.gate_keep:g} " if args.gate_keep else "")
                   + (f"--device {args.device} " if args.device != "cpu" else "")
                   + f"--version {args.version}"
                   + (" --resume PREVIOUS" if args.resume
                      else f" --decoder {','.join(map(str, decoder))}"))
        runs = prev_runs + [{"steps": total, "minutes": round(train_s / 60, 1), "lr": args.lr,
                             "tex": args.tex, "tex_mask": args.tex_mask, "recipes": args.recipes,
                             "family": args.family, "extra_photos": args.extra_photos,
                             "stats_map": args.stats_map,
                             **({"ink_weight": args.ink_weight} if args.ink_weight != 1.0 else {}),
                             "upsample": upsample, "keep_colour": int(keep_colour),
                             **({"drawings": args.drawings} if args.drawings > 0 else {}),
                             **({"draw_lost": args.draw_lost} if args.draw_lost else {}),
                             **({"photos_kept": args.photos_kept} if args.photos_kept else {}),
                             **({"draw_scales": list(args.draw_scales)}
                                if args.drawings > 0 and args.draw_scales != DRAW_SCALES else {}),
                             **({"grid": args.grid} if args.grid > 0 else {}),
                             **({"gate": gate, "gate_bce": args.gate_bce, "freeze": args.freeze}
                                if gate else {}),
                             **({"gate_keep": args.gate_keep} if args.gate_keep else {}),
                             "device": args.device, "command": command}]
        training = {"script": "tools/train_a2r_lite.py", "seed": SEED,
                    "steps": sum(r["steps"] for r in runs),
                    "minutes": round(sum(r["minutes"] for r in runs), 1), "runs": runs,
                    "batch": BATCH, "crop": CROP,
                    "loss": "L1" + (f" ({args.ink_weight:g} x on ink)" if args.ink_weight != 1.0 else "")
                            + f" + {GRAD_W} x gradient L1 + {args.tex} x local HF-energy L1"
                            + (" + content-map MSE on [mean, ln std]" if args.stats_map else "")
                            + (f" + {args.drawings:g} x drawing preservation (low-pass L1 + added "
                               + (f"+ {args.draw_lost:g} x removed " if args.draw_lost else "")
                               + "HF energy) on real drawings"
                               + (f" ({args.photos_kept:g} of them untoonified photos)"
                                  if args.photos_kept else "") if args.drawings > 0 else "")
                            + (f" + {args.grid:g} x residual phase-pattern RMS" if args.grid > 0
                               else "")
                            + (f" + {args.gate_bce:g} x gate cross-entropy (toons 1, drawings 0)"
                               if args.gate_bce > 0 else "")
                            + (f" + {args.gate_keep:g} x mean |gate - the resumed network's|"
                               if args.gate_keep else ""),
                    "data": data_note(photos), "decoder": decoder, "upsample": upsample,
                    "keep_colour": int(keep_colour), "gate": gate, "held_out": HELD_OUT,
                    "drawings": sorted(set(draw_credits if args.drawings > 0 else [])
                                       | set((prev or {}).get("drawings", []))),
                    "validation": VALIDATION, "gflops_512": round(gflops, 3), "params": params,
                    "torch": torch.__version__}
        pipe.write_manifest(out_dir, receptive_field=rf, training=training, version=args.version,
                            enhance=enhance)
        enc.train()
        dec.train()

    # --steps: cosine over the step count (deterministic replay). --minutes: cosine over the
    # elapsed fraction of the budget (CPU shared with other jobs: the step time drifts), stop at
    # the budget; the step count reached is recorded, and `--steps N` replays a schedule of N.
    total = args.steps
    budget = None if args.minutes is None else args.minutes * 60
    t_train = time.time()
    step, log_l = 0, []
    while True:
        elapsed = time.time() - t_train
        if (total is not None and step >= total) or (budget is not None and elapsed >= budget):
            break
        frac = step / total if total is not None else elapsed / budget
        for gr in opt.param_groups:
            gr["lr"] = LR_MIN + 0.5 * (args.lr - LR_MIN) * (1 + math.cos(math.pi * frac))
        x, y = (t.to(dev) for t in sample_batch(pairs, rng, weights))
        enc.train()
        dec.train()
        f = enc(x)
        with torch.no_grad():     # target statistics: encoder(photo), no gradient through them
            m, s = channel_stats(enc(y))
        stats_l = torch.zeros((), device=dev)
        if smap is not None:      # predicted from the toon, as at inference (or the photo's own)
            pm, ps = smap(*channel_stats(f))
            stats_l = (log_stats(pm, ps) - log_stats(m, s)).pow(2).mean()
            if rng.rand() >= ORACLE_P:
                m, s = pm, ps
        elif rng.rand() < 0.3:    # batch-average statistics, as the bundled average at inference
            m, s = m.mean(0, keepdim=True), s.mean(0, keepdim=True)
        d, g = dec(adain(f, m, s), with_gate=True)
        out = x + d
        free = ink_free(x, y) if args.tex_mask or args.ink_weight != 1.0 else None
        tex = hf_energy_loss(out, y, free if args.tex_mask else None)
        l1 = (out - y).abs()
        if args.ink_weight != 1.0:   # the toon's ink pixels count ink_weight times in the L1
            l1 = l1 * (1.0 + (args.ink_weight - 1.0) * (1.0 - free))
        loss = l1.mean() + GRAD_W * grad_l1(out, y) + args.tex * tex + stats_l
        if args.grid > 0:
            loss = loss + args.grid * phase_pattern(out - x)
        if start is not None:
            loss = loss + args.gate_keep * (g - start_gate(start, x, m, s)).abs().mean()
        draw_l = torch.zeros((), device=dev)
        if args.drawings > 0:     # real drawings, as at inference (predicted statistics)
            xd = sample_drawings(drawings, rng, kept, args.photos_kept).to(dev)
            fd = enc(xd)
            md, sd_ = smap(*channel_stats(fd)) if smap is not None else (
                torch.tensor(fixed_stats[0], device=dev).view(1, -1, 1, 1),
                torch.tensor(fixed_stats[1], device=dev).view(1, -1, 1, 1))
            dd, gd = dec(adain(fd, md, sd_), with_gate=True)
            outd = xd + dd
            draw_l = drawing_loss(outd, xd, args.draw_lost)
            if args.grid > 0:
                draw_l = draw_l + args.grid * phase_pattern(outd - xd)
            if args.gate_bce > 0:   # the toons' gate towards 1, the drawings' towards 0
                draw_l = draw_l + args.gate_bce * (
                    Fn.binary_cross_entropy(g.clamp(1e-4, 1 - 1e-4), torch.ones_like(g))
                    + Fn.binary_cross_entropy(gd.clamp(1e-4, 1 - 1e-4), torch.zeros_like(gd)))
            loss = loss + args.drawings * draw_l
            if start is not None:   # not scaled by --drawings: the same weight as on the toons
                loss = loss + args.gate_keep * (gd - start_gate(start, xd, md, sd_)).abs().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        log_l.append((loss.item(), tex.item(), draw_l.item(),
                      g.mean().item() if g is not None else 1.0,
                      gd.mean().item() if args.drawings > 0 and gd is not None else 1.0))
        step += 1
        if step % LOG_EVERY == 0:
            lm = np.mean(log_l[-LOG_EVERY:], 0)
            print(f"step {step} lr {opt.param_groups[0]['lr']:.2e} loss {lm[0]:.4f} tex {lm[1]:.4f} "
                  f"drawings {lm[2]:.4f} gate toons {lm[3]:.3f} drawings {lm[4]:.3f} "
                  f"{time.time() - t_train:.0f} s", flush=True)
        if args.save_every and step % args.save_every == 0:
            write_package(os.path.join(args.out, f"step{step:05d}"), step, time.time() - t_train)
            print(f"step {step}: package written to {args.out}/step{step:05d}", flush=True)
    write_package(args.out, step, time.time() - t_train)
    print(f"trained {step} steps in {(time.time() - t_train) / 60:.1f} min; package written to "
          f"{args.out}")


if __name__ == "__main__":
    main()
