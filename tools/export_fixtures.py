"""Export the six generator families as small ONNX test fixtures (needs torch; the tests do not).

Each network is written the way its public code shapes it (layer order, padding modes, norms,
the forward's shape arithmetic), at small widths with seeded random weights, and exported with
torch.onnx.export: the TorchScript exporter (dynamo=False) with dynamic H/W, which emits the
classic Shape/Gather/Unsqueeze/Concat shape subgraphs. Families and what each exercises:

  cyclegan_resnet  CycleGAN ResnetGenerator: reflect Pad, InstanceNorm, ConvTranspose (opset 13)
  pix2pix_unet     pix2pix UnetGenerator: BatchNorm, LeakyRelu, ConvTranspose, Dropout (eval),
                   Concat skips; wrapped in a reflect pad to a multiple of 32 and a crop, so any
                   size runs (shape arithmetic: Shape, Gather, Mod/Sub, Slice)
  ugatit_light     U-GAT-IT generator, light: AdaLIN/ILN decomposed (ReduceMean, Sub, Pow, Sqrt,
                   Div; torch.var's n/(n-1) from the shape), MatMul, GlobalAvg/MaxPool (CAM),
                   nearest Upsample (opset 11); all three outputs (picture, cam_logit, heatmap)
  ugatit_full      U-GAT-IT generator, full: the FC takes the flattened feature map, so the
                   model is exported at a fixed 24x24 (the fixed-shape case)
  animeganv2       AnimeGANv2 generator: depthwise convs, GroupNorm(1, C), asymmetric pads,
                   bilinear Resize to sizes taken from the input's shape
  rrdb_x4          ESRGAN RRDBNet x4: dense blocks with Concat, scaled residuals, nearest x2 twice
  realcugan_unet   Real-CUGAN UpCunet2x-style: reflect pad to even size + 18, UNetConv with SE
                   blocks (mean over H, W), ConvTranspose, negative pads (crop), final Slice
  animeganv2_dynamo  the AnimeGANv2 network through the dynamo exporter (when it works)

Usage (from the repository root):  python tools/export_fixtures.py [--out tests/fixtures/generators]
Every file is checked with onnx.checker and against the torch output with onnxruntime.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

# --- CycleGAN ResnetGenerator (junyanz/pytorch-CycleGAN-and-pix2pix, norm='instance') ----------


class ResnetBlock(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.conv_block = nn.Sequential(
            nn.ReflectionPad2d(1), nn.Conv2d(dim, dim, 3, bias=True), nn.InstanceNorm2d(dim),
            nn.ReLU(True),
            nn.ReflectionPad2d(1), nn.Conv2d(dim, dim, 3, bias=True), nn.InstanceNorm2d(dim))

    def forward(self, x):
        return x + self.conv_block(x)


class CycleGANResnet(nn.Module):
    def __init__(self, ngf=8, n_blocks=3, n_down=2):
        super().__init__()
        m = [nn.ReflectionPad2d(3), nn.Conv2d(3, ngf, 7, bias=True), nn.InstanceNorm2d(ngf),
             nn.ReLU(True)]
        for i in range(n_down):
            mult = 2 ** i
            m += [nn.Conv2d(ngf * mult, ngf * mult * 2, 3, stride=2, padding=1, bias=True),
                  nn.InstanceNorm2d(ngf * mult * 2), nn.ReLU(True)]
        mult = 2 ** n_down
        m += [ResnetBlock(ngf * mult) for _ in range(n_blocks)]
        for i in range(n_down):
            mult = 2 ** (n_down - i)
            m += [nn.ConvTranspose2d(ngf * mult, ngf * mult // 2, 3, stride=2, padding=1,
                                     output_padding=1, bias=True),
                  nn.InstanceNorm2d(ngf * mult // 2), nn.ReLU(True)]
        m += [nn.ReflectionPad2d(3), nn.Conv2d(ngf, 3, 7), nn.Tanh()]
        self.model = nn.Sequential(*m)

    def forward(self, x):
        return self.model(x)


# --- pix2pix UnetGenerator (norm='batch', use_dropout=True) -------------------------------------


class UnetBlock(nn.Module):
    def __init__(self, outer_nc, inner_nc, input_nc=None, sub=None, outermost=False,
                 innermost=False, use_dropout=False):
        super().__init__()
        self.outermost = outermost
        input_nc = outer_nc if input_nc is None else input_nc
        downconv = nn.Conv2d(input_nc, inner_nc, 4, stride=2, padding=1, bias=False)
        downrelu, downnorm = nn.LeakyReLU(0.2, True), nn.BatchNorm2d(inner_nc)
        uprelu, upnorm = nn.ReLU(True), nn.BatchNorm2d(outer_nc)
        if outermost:
            upconv = nn.ConvTranspose2d(inner_nc * 2, outer_nc, 4, stride=2, padding=1)
            model = [downconv, sub, uprelu, upconv, nn.Tanh()]
        elif innermost:
            upconv = nn.ConvTranspose2d(inner_nc, outer_nc, 4, stride=2, padding=1, bias=False)
            model = [downrelu, downconv, uprelu, upconv, upnorm]
        else:
            upconv = nn.ConvTranspose2d(inner_nc * 2, outer_nc, 4, stride=2, padding=1,
                                        bias=False)
            model = [downrelu, downconv, downnorm, sub, uprelu, upconv, upnorm]
            if use_dropout:
                model += [nn.Dropout(0.5)]
        self.model = nn.Sequential(*model)

    def forward(self, x):
        return self.model(x) if self.outermost else torch.cat([x, self.model(x)], 1)


class Pix2PixUnet(nn.Module):
    """UnetGenerator(num_downs=5), run on any size: reflect pad to a multiple of 32, crop back."""

    def __init__(self, ngf=8, num_downs=5):
        super().__init__()
        b = UnetBlock(ngf * 8, ngf * 8, innermost=True)
        for _ in range(num_downs - 5):
            b = UnetBlock(ngf * 8, ngf * 8, sub=b, use_dropout=True)
        b = UnetBlock(ngf * 4, ngf * 8, sub=b, use_dropout=True)
        b = UnetBlock(ngf * 2, ngf * 4, sub=b)
        b = UnetBlock(ngf, ngf * 2, sub=b)
        self.model = UnetBlock(3, ngf, input_nc=3, sub=b, outermost=True)
        self.multiple = 2 ** num_downs

    def forward(self, x):
        h, w = x.shape[2], x.shape[3]
        ph, pw = (self.multiple - h % self.multiple) % self.multiple, \
            (self.multiple - w % self.multiple) % self.multiple
        y = self.model(F.pad(x, (0, pw, 0, ph), mode="reflect"))
        return y[:, :, :h, :w]


# --- U-GAT-IT ResnetGenerator (znxlwm/UGATIT-pytorch) -------------------------------------------


def _mix_instance_layer_norm(input, rho, eps):
    """rho * instance norm + (1 - rho) * layer norm of input (N, C, H, W), both with unbiased
    variance; rho (1, C, 1, 1) is expanded over the batch. adaILN's and ILN's common part."""
    in_mean, in_var = torch.mean(input, dim=[2, 3], keepdim=True), \
        torch.var(input, dim=[2, 3], keepdim=True)
    out_in = (input - in_mean) / torch.sqrt(in_var + eps)
    ln_mean, ln_var = torch.mean(input, dim=[1, 2, 3], keepdim=True), \
        torch.var(input, dim=[1, 2, 3], keepdim=True)
    out_ln = (input - ln_mean) / torch.sqrt(ln_var + eps)
    return rho.expand(input.shape[0], -1, -1, -1) * out_in + \
        (1 - rho.expand(input.shape[0], -1, -1, -1)) * out_ln


class adaILN(nn.Module):
    def __init__(self, num_features, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.rho = nn.Parameter(torch.Tensor(1, num_features, 1, 1).uniform_(0.3, 1.0))

    def forward(self, input, gamma, beta):
        out = _mix_instance_layer_norm(input, self.rho, self.eps)
        return out * gamma.unsqueeze(2).unsqueeze(3) + beta.unsqueeze(2).unsqueeze(3)


class ILN(nn.Module):
    def __init__(self, num_features, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.rho = nn.Parameter(torch.Tensor(1, num_features, 1, 1).uniform_(0.0, 0.5))
        self.gamma = nn.Parameter(torch.Tensor(1, num_features, 1, 1).uniform_(0.8, 1.2))
        self.beta = nn.Parameter(torch.Tensor(1, num_features, 1, 1).uniform_(-0.1, 0.1))

    def forward(self, input):
        out = _mix_instance_layer_norm(input, self.rho, self.eps)
        return out * self.gamma.expand(input.shape[0], -1, -1, -1) + \
            self.beta.expand(input.shape[0], -1, -1, -1)


class ResnetAdaILNBlock(nn.Module):
    def __init__(self, dim, use_bias):
        super().__init__()
        self.pad1, self.conv1 = nn.ReflectionPad2d(1), nn.Conv2d(dim, dim, 3, bias=use_bias)
        self.norm1, self.relu1 = adaILN(dim), nn.ReLU(True)
        self.pad2, self.conv2 = nn.ReflectionPad2d(1), nn.Conv2d(dim, dim, 3, bias=use_bias)
        self.norm2 = adaILN(dim)

    def forward(self, x, gamma, beta):
        out = self.relu1(self.norm1(self.conv1(self.pad1(x)), gamma, beta))
        out = self.norm2(self.conv2(self.pad2(out)), gamma, beta)
        return out + x


class UGATIT(nn.Module):
    def __init__(self, ngf=8, n_blocks=2, img_size=24, light=True):
        super().__init__()
        self.light, n_down = light, 2
        down = [nn.ReflectionPad2d(3), nn.Conv2d(3, ngf, 7, bias=False), nn.InstanceNorm2d(ngf),
                nn.ReLU(True)]
        for i in range(n_down):
            mult = 2 ** i
            down += [nn.ReflectionPad2d(1),
                     nn.Conv2d(ngf * mult, ngf * mult * 2, 3, stride=2, bias=False),
                     nn.InstanceNorm2d(ngf * mult * 2), nn.ReLU(True)]
        mult = 2 ** n_down
        for _ in range(n_blocks):
            down += [ResnetBlock(ngf * mult)]
        self.DownBlock = nn.Sequential(*down)
        self.gap_fc = nn.Linear(ngf * mult, 1, bias=False)
        self.gmp_fc = nn.Linear(ngf * mult, 1, bias=False)
        self.conv1x1 = nn.Conv2d(ngf * mult * 2, ngf * mult, 1, bias=True)
        self.relu = nn.ReLU(True)
        fc_in = ngf * mult if light else img_size // mult * img_size // mult * ngf * mult
        self.FC = nn.Sequential(nn.Linear(fc_in, ngf * mult, bias=False), nn.ReLU(True),
                                nn.Linear(ngf * mult, ngf * mult, bias=False), nn.ReLU(True))
        self.gamma = nn.Linear(ngf * mult, ngf * mult, bias=False)
        self.beta = nn.Linear(ngf * mult, ngf * mult, bias=False)
        for i in range(n_blocks):
            setattr(self, "UpBlock1_" + str(i + 1), ResnetAdaILNBlock(ngf * mult, False))
        up = []
        for i in range(n_down):
            mult = 2 ** (n_down - i)
            up += [nn.Upsample(scale_factor=2, mode="nearest"), nn.ReflectionPad2d(1),
                   nn.Conv2d(ngf * mult, ngf * mult // 2, 3, bias=False),
                   ILN(ngf * mult // 2), nn.ReLU(True)]
        up += [nn.ReflectionPad2d(3), nn.Conv2d(ngf, 3, 7, bias=False), nn.Tanh()]
        self.UpBlock2 = nn.Sequential(*up)
        self.n_blocks = n_blocks

    def forward(self, input):
        x = self.DownBlock(input)
        gap = F.adaptive_avg_pool2d(x, 1)
        gap_logit = self.gap_fc(gap.view(x.shape[0], -1))
        gap = x * list(self.gap_fc.parameters())[0].unsqueeze(2).unsqueeze(3)
        gmp = F.adaptive_max_pool2d(x, 1)
        gmp_logit = self.gmp_fc(gmp.view(x.shape[0], -1))
        gmp = x * list(self.gmp_fc.parameters())[0].unsqueeze(2).unsqueeze(3)
        cam_logit = torch.cat([gap_logit, gmp_logit], 1)
        x = self.relu(self.conv1x1(torch.cat([gap, gmp], 1)))
        heatmap = torch.sum(x, dim=1, keepdim=True)
        if self.light:
            x_ = self.FC(F.adaptive_avg_pool2d(x, 1).view(x.shape[0], -1))
        else:
            x_ = self.FC(x.view(x.shape[0], -1))
        gamma, beta = self.gamma(x_), self.beta(x_)
        for i in range(self.n_blocks):
            x = getattr(self, "UpBlock1_" + str(i + 1))(x, gamma, beta)
        return self.UpBlock2(x), cam_logit, heatmap


class ImageOnly(nn.Module):
    """The picture output of a network that returns (picture, extras...)."""

    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x):
        return self.net(x)[0]


# --- AnimeGANv2 Generator (bryandlee/animegan2-pytorch) -----------------------------------------


class ConvNormLReLU(nn.Sequential):
    def __init__(self, in_ch, out_ch, kernel_size=3, stride=1, padding=1, pad_mode="reflect",
                 groups=1, bias=False):
        pad_layer = {"zero": nn.ZeroPad2d, "same": nn.ReplicationPad2d,
                     "reflect": nn.ReflectionPad2d}
        super().__init__(pad_layer[pad_mode](padding),
                         nn.Conv2d(in_ch, out_ch, kernel_size, stride, 0, groups=groups,
                                   bias=bias),
                         nn.GroupNorm(1, out_ch, affine=True), nn.LeakyReLU(0.2, True))


class InvertedResBlock(nn.Module):
    def __init__(self, in_ch, out_ch, expansion_ratio=2):
        super().__init__()
        self.use_res_connect = in_ch == out_ch
        bottleneck = int(round(in_ch * expansion_ratio))
        layers = [ConvNormLReLU(in_ch, bottleneck, kernel_size=1, padding=0),
                  ConvNormLReLU(bottleneck, bottleneck, groups=bottleneck, bias=True),
                  nn.Conv2d(bottleneck, out_ch, kernel_size=1, padding=0, bias=False),
                  nn.GroupNorm(1, out_ch, affine=True)]
        self.layers = nn.Sequential(*layers)

    def forward(self, x):
        out = self.layers(x)
        return x + out if self.use_res_connect else out


class AnimeGANv2(nn.Module):
    def __init__(self, w=4):   # w=32 in the released model
        super().__init__()
        self.block_a = nn.Sequential(ConvNormLReLU(3, w, kernel_size=7, padding=3),
                                     ConvNormLReLU(w, 2 * w, stride=2, padding=(0, 1, 0, 1)),
                                     ConvNormLReLU(2 * w, 2 * w))
        self.block_b = nn.Sequential(ConvNormLReLU(2 * w, 4 * w, stride=2, padding=(0, 1, 0, 1)),
                                     ConvNormLReLU(4 * w, 4 * w))
        self.block_c = nn.Sequential(ConvNormLReLU(4 * w, 4 * w),
                                     InvertedResBlock(4 * w, 8 * w, 2),
                                     InvertedResBlock(8 * w, 8 * w, 2),
                                     InvertedResBlock(8 * w, 8 * w, 2),
                                     ConvNormLReLU(8 * w, 4 * w))
        self.block_d = nn.Sequential(ConvNormLReLU(4 * w, 4 * w), ConvNormLReLU(4 * w, 4 * w))
        self.block_e = nn.Sequential(ConvNormLReLU(4 * w, 2 * w), ConvNormLReLU(2 * w, 2 * w),
                                     ConvNormLReLU(2 * w, w, kernel_size=7, padding=3))
        self.out_layer = nn.Sequential(nn.Conv2d(w, 3, kernel_size=1, bias=False), nn.Tanh())

    def forward(self, input):   # the released forward's default, align_corners=True
        out = self.block_a(input)
        half_size = out.size()[-2:]
        out = self.block_c(self.block_b(out))
        out = F.interpolate(out, half_size, mode="bilinear", align_corners=True)
        out = self.block_d(out)
        out = F.interpolate(out, input.size()[-2:], mode="bilinear",
                            align_corners=True)
        return self.out_layer(self.block_e(out))


# --- ESRGAN RRDBNet x4 (xinntao/ESRGAN) ---------------------------------------------------------


class ResidualDenseBlock5C(nn.Module):
    def __init__(self, nf, gc):
        super().__init__()
        self.conv1 = nn.Conv2d(nf, gc, 3, 1, 1)
        self.conv2 = nn.Conv2d(nf + gc, gc, 3, 1, 1)
        self.conv3 = nn.Conv2d(nf + 2 * gc, gc, 3, 1, 1)
        self.conv4 = nn.Conv2d(nf + 3 * gc, gc, 3, 1, 1)
        self.conv5 = nn.Conv2d(nf + 4 * gc, nf, 3, 1, 1)
        self.lrelu = nn.LeakyReLU(negative_slope=0.2, inplace=True)

    def forward(self, x):
        x1 = self.lrelu(self.conv1(x))
        x2 = self.lrelu(self.conv2(torch.cat((x, x1), 1)))
        x3 = self.lrelu(self.conv3(torch.cat((x, x1, x2), 1)))
        x4 = self.lrelu(self.conv4(torch.cat((x, x1, x2, x3), 1)))
        x5 = self.conv5(torch.cat((x, x1, x2, x3, x4), 1))
        return x5 * 0.2 + x


class RRDB(nn.Module):
    def __init__(self, nf, gc):
        super().__init__()
        self.RDB1, self.RDB2, self.RDB3 = (ResidualDenseBlock5C(nf, gc) for _ in range(3))

    def forward(self, x):
        return self.RDB3(self.RDB2(self.RDB1(x))) * 0.2 + x


class RRDBNet(nn.Module):
    def __init__(self, nf=8, nb=1, gc=4):
        super().__init__()
        self.conv_first = nn.Conv2d(3, nf, 3, 1, 1)
        self.RRDB_trunk = nn.Sequential(*[RRDB(nf, gc) for _ in range(nb)])
        self.trunk_conv = nn.Conv2d(nf, nf, 3, 1, 1)
        self.upconv1 = nn.Conv2d(nf, nf, 3, 1, 1)
        self.upconv2 = nn.Conv2d(nf, nf, 3, 1, 1)
        self.HRconv = nn.Conv2d(nf, nf, 3, 1, 1)
        self.conv_last = nn.Conv2d(nf, 3, 3, 1, 1)
        self.lrelu = nn.LeakyReLU(negative_slope=0.2, inplace=True)

    def forward(self, x):
        fea = self.conv_first(x)
        fea = fea + self.trunk_conv(self.RRDB_trunk(fea))
        fea = self.lrelu(self.upconv1(F.interpolate(fea, scale_factor=2, mode="nearest")))
        fea = self.lrelu(self.upconv2(F.interpolate(fea, scale_factor=2, mode="nearest")))
        return self.conv_last(self.lrelu(self.HRconv(fea)))


# --- Real-CUGAN UpCunet2x (bilibili/ailab Real-CUGAN, upcunet_v3) -------------------------------


class SEBlock(nn.Module):
    def __init__(self, c, reduction=8, bias=False):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c // reduction, 1, 1, 0, bias=bias)
        self.conv2 = nn.Conv2d(c // reduction, c, 1, 1, 0, bias=bias)

    def forward(self, x):
        x0 = torch.mean(x, dim=(2, 3), keepdim=True)
        x0 = torch.sigmoid(self.conv2(F.relu(self.conv1(x0), inplace=True)))
        return torch.mul(x, x0)


class UNetConv(nn.Module):
    def __init__(self, cin, cmid, cout, se):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv2d(cin, cmid, 3, 1, 0), nn.LeakyReLU(0.1, True),
                                  nn.Conv2d(cmid, cout, 3, 1, 0), nn.LeakyReLU(0.1, True))
        self.seblock = SEBlock(cout, reduction=8, bias=True) if se else None

    def forward(self, x):
        z = self.conv(x)
        return self.seblock(z) if self.seblock is not None else z


class UNet1(nn.Module):
    def __init__(self, cin, cout, deconv, w):
        super().__init__()
        self.conv1 = UNetConv(cin, w // 2, w, se=False)
        self.conv1_down = nn.Conv2d(w, w, 2, 2, 0)
        self.conv2 = UNetConv(w, 2 * w, w, se=True)
        self.conv2_up = nn.ConvTranspose2d(w, w, 2, 2, 0)
        self.conv3 = nn.Conv2d(w, w, 3, 1, 0)
        self.conv_bottom = nn.ConvTranspose2d(w, cout, 4, 2, 3) if deconv else \
            nn.Conv2d(w, cout, 3, 1, 0)

    def forward(self, x):
        x1 = self.conv1(x)
        x2 = F.leaky_relu(self.conv1_down(x1), 0.1, inplace=True)
        x2 = F.leaky_relu(self.conv2_up(self.conv2(x2)), 0.1, inplace=True)
        x1 = F.pad(x1, (-4, -4, -4, -4))
        x3 = F.leaky_relu(self.conv3(x1 + x2), 0.1, inplace=True)
        return self.conv_bottom(x3)


class UNet2(nn.Module):
    def __init__(self, cin, cout, w):
        super().__init__()
        self.conv1 = UNetConv(cin, w // 2, w, se=False)
        self.conv1_down = nn.Conv2d(w, w, 2, 2, 0)
        self.conv2 = UNetConv(w, w, 2 * w, se=True)
        self.conv2_down = nn.Conv2d(2 * w, 2 * w, 2, 2, 0)
        self.conv3 = UNetConv(2 * w, 4 * w, 2 * w, se=True)
        self.conv3_up = nn.ConvTranspose2d(2 * w, 2 * w, 2, 2, 0)
        self.conv4 = UNetConv(2 * w, w, w, se=True)
        self.conv4_up = nn.ConvTranspose2d(w, w, 2, 2, 0)
        self.conv5 = nn.Conv2d(w, w, 3, 1, 0)
        self.conv_bottom = nn.Conv2d(w, cout, 3, 1, 0)

    def forward(self, x):
        x1 = self.conv1(x)
        x2 = self.conv2(F.leaky_relu(self.conv1_down(x1), 0.1, inplace=True))
        x3 = self.conv3(F.leaky_relu(self.conv2_down(x2), 0.1, inplace=True))
        x3 = F.leaky_relu(self.conv3_up(x3), 0.1, inplace=True)
        x4 = self.conv4(F.pad(x2, (-4, -4, -4, -4)) + x3)
        x4 = F.leaky_relu(self.conv4_up(x4), 0.1, inplace=True)
        x5 = F.leaky_relu(self.conv5(F.pad(x1, (-16, -16, -16, -16)) + x4), 0.1, inplace=True)
        return self.conv_bottom(x5)


class UpCunet2x(nn.Module):
    def __init__(self, w=16):   # w=64 in the released model
        super().__init__()
        self.unet1 = UNet1(3, 3, deconv=True, w=w)
        self.unet2 = UNet2(3, 3, w=w)

    def forward(self, x):
        h0, w0 = x.shape[2], x.shape[3]
        ph, pw = ((h0 - 1) // 2 + 1) * 2, ((w0 - 1) // 2 + 1) * 2
        x = F.pad(x, (18, 18 + pw - w0, 18, 18 + ph - h0), "reflect")
        x = self.unet1.forward(x)
        x0 = self.unet2.forward(x)
        x = torch.add(x0, F.pad(x, (-20, -20, -20, -20)))
        return x[:, :, :h0 * 2, :w0 * 2]


# --- export -------------------------------------------------------------------------------------

# name -> (constructor, opset, example (H, W), dynamic H/W, dynamo)
FAMILIES = {
    "cyclegan_resnet": (lambda: CycleGANResnet(ngf=8, n_blocks=2), 13, (32, 32), True, False),
    "pix2pix_unet": (lambda: Pix2PixUnet(ngf=4), 17, (64, 64), True, False),
    "ugatit_light": (lambda: UGATIT(ngf=4, light=True), 11, (32, 32), True, False),
    "ugatit_full": (lambda: ImageOnly(UGATIT(ngf=4, light=False, img_size=24)), 17, (24, 24),
                    False, False),
    "animeganv2": (lambda: AnimeGANv2(w=3), 17, (32, 32), True, False),
    "rrdb_x4": (lambda: RRDBNet(), 17, (16, 16), True, False),
    "realcugan_unet": (lambda: UpCunet2x(w=12), 17, (32, 32), True, False),
    "animeganv2_dynamo": (lambda: AnimeGANv2(w=3), 18, (32, 32), True, True),
}


def _randomise(net: nn.Module, seed: int) -> None:
    """Seeded random weights at a scale that keeps activations O(1) through the depth, and
    non-trivial BatchNorm running statistics (so folding them is tested)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in net.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.copy_(torch.randn(m.num_features, generator=g) * 0.1)
                m.running_var.copy_(torch.rand(m.num_features, generator=g) * 0.5 + 0.75)
                m.weight.copy_(torch.rand(m.num_features, generator=g) * 0.5 + 0.75)
                m.bias.copy_(torch.randn(m.num_features, generator=g) * 0.1)
            elif isinstance(m, nn.GroupNorm):
                m.weight.copy_(torch.rand(m.num_channels, generator=g) * 0.5 + 0.75)
                m.bias.copy_(torch.randn(m.num_channels, generator=g) * 0.1)
            elif isinstance(m, (nn.Conv2d, nn.ConvTranspose2d, nn.Linear)):
                fan_in = m.weight[0].numel() if not isinstance(m, nn.ConvTranspose2d) else \
                    m.weight.shape[0] * m.weight[0, 0].numel() // max(1, m.stride[0] ** 2)
                m.weight.copy_(torch.randn(m.weight.shape, generator=g) / fan_in ** 0.5)
                if m.bias is not None:
                    m.bias.copy_(torch.randn(m.bias.shape, generator=g) * 0.05)


def export(name: str, out_dir: str, check: bool = True) -> str:
    make, opset, (h, w), dynamic, dynamo = FAMILIES[name]
    torch.manual_seed(0)
    net = make()
    _randomise(net, seed=sum(map(ord, name)))
    net.eval()
    x = torch.rand(1, 3, h, w) * 2 - 1
    path = os.path.join(out_dir, name + ".onnx")
    extra = ["cam_logit", "heatmap"] if isinstance(net, UGATIT) else []
    kw = dict(input_names=["input"], output_names=["output"] + extra, opset_version=opset)
    if dynamo:
        dims = ({2: torch.export.Dim("H", min=16, max=4096),
                 3: torch.export.Dim("W", min=16, max=4096)},) if dynamic else None
        prog = torch.onnx.export(net, (x,), dynamo=True, external_data=False,
                                 dynamic_shapes=dims, **kw)
        prog.save(path)
    else:
        if dynamic:
            kw["dynamic_axes"] = {"input": {2: "H", 3: "W"}, "output": {2: "OH", 3: "OW"},
                                  **({"heatmap": {2: "h", 3: "w"}} if extra else {})}
        torch.onnx.export(net, (x,), path, dynamo=False, do_constant_folding=True, **kw)
    _strip(path)
    if check:
        _check(net, path, dynamic, (h, w))
    return path


def _strip(path):
    """Drop per-node doc strings and metadata (the dynamo exporter stores stack traces there:
    3/4 of the file); the graph is unchanged."""
    import onnx
    m = onnx.load(path)
    for n in m.graph.node:
        n.doc_string = ""
        del n.metadata_props[:]
    onnx.save(m, path)


def _check(net, path, dynamic, size):
    import onnx
    import onnxruntime as ort
    onnx.checker.check_model(onnx.load(path))
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    sizes = [size] + ([(size[0] + 13, size[1] + 7)] if dynamic else [])
    for hw in sizes:
        x = torch.rand(1, 3, *hw) * 2 - 1
        with torch.no_grad():
            ref = net(x)
            ref = (ref[0] if isinstance(ref, tuple) else ref).numpy()
        got = sess.run(None, {name: x.numpy()})[0]
        err = float(np.abs(got - ref).max())
        if got.shape != ref.shape or err > 1e-4 * max(1.0, float(np.abs(ref).max())):
            raise SystemExit(f"{path}: onnxruntime differs from torch at {hw}: shapes "
                             f"{got.shape} {ref.shape}, max error {err:.3g}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join("tests", "fixtures", "generators"))
    ap.add_argument("names", nargs="*", default=list(FAMILIES))
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    for name in args.names:
        try:
            path = export(name, args.out)
        except Exception as exc:   # the dynamo exporter is optional: say why it did not work
            if not FAMILIES[name][4]:
                raise
            print(f"{name}: dynamo export failed: {type(exc).__name__}: {exc}", file=sys.stderr)
            continue
        print(f"{path}: {os.path.getsize(path)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
