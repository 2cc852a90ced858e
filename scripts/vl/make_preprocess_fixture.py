#!/usr/bin/env python3
"""Writes tests/data/vl/: small synthetic PNGs and what transformers' slow
Qwen2-VL image processor (the one Qwen3-VL shares) makes of them.

Run from the repository root with transformers, numpy and pillow installed
(no torch needed):  python3 scripts/vl/make_preprocess_fixture.py

The Rust test `vl::preprocess_matches_transformers_fixture` reads the output.
"""

import json
import os

import numpy as np
import PIL
import transformers
from PIL import Image
from transformers.models.qwen2_vl.image_processing_qwen2_vl import Qwen2VLImageProcessor

OUT = os.path.join("tests", "data", "vl")


def pattern(h, w, channels, seed):
    """A deterministic image with edges, gradients and noise (so resampling matters)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    planes = []
    for c in range(channels):
        smooth = (x * (40 + 17 * c) / max(w, 1) + y * (90 - 23 * c) / max(h, 1)) * 1.3
        stripes = 60.0 * (((x // (2 + c)) + (y // 3)) % 2)
        noise = rng.integers(0, 70, size=(h, w))
        planes.append(np.clip(smooth + stripes + noise, 0, 255))
    arr = np.stack(planes, axis=-1).astype(np.uint8)
    return arr[..., 0] if channels == 1 else arr


# name, (height, width), PIL mode, preprocessor_config.json (HF form), rows kept in full
CASES = [
    # Downscale branch, wide image, small patches so that every value fits in the fixture.
    ("wide_down", (53, 97), "RGB",
     {"min_pixels": 64, "max_pixels": 1024, "patch_size": 4, "temporal_patch_size": 2,
      "merge_size": 2, "image_mean": [0.48145466, 0.4578275, 0.40821073],
      "image_std": [0.26862954, 0.26130258, 0.27577711], "rescale_factor": 0.00392156862745098,
      "do_resize": True, "resample": 3, "image_processor_type": "Qwen2VLImageProcessor"}, None),
    # Upscale branch (min_pixels), `size` form of the limits.
    ("tiny_up", (5, 7), "RGB",
     {"size": {"shortest_edge": 1024, "longest_edge": 4096}, "patch_size": 4,
      "temporal_patch_size": 2, "merge_size": 2, "image_mean": [0.5, 0.5, 0.5],
      "image_std": [0.5, 0.5, 0.5], "processor_class": "Qwen3VLProcessor"}, None),
    # Tall RGBA image: the alpha channel is dropped by the RGB conversion.
    ("tall_rgba", (90, 30), "RGBA",
     {"size": {"shortest_edge": 256, "longest_edge": 1024}, "patch_size": 4,
      "temporal_patch_size": 2, "merge_size": 2, "image_mean": 0.5, "image_std": 0.5}, None),
    # Grayscale with Qwen3-VL's real patch geometry (16 x 16, merge 2): rows sampled.
    ("gray_patch16", (77, 120), "L",
     {"size": {"shortest_edge": 1024, "longest_edge": 8192}, "patch_size": 16,
      "temporal_patch_size": 2, "merge_size": 2, "image_mean": [0.5, 0.5, 0.5],
      "image_std": [0.5, 0.5, 0.5], "rescale_factor": 0.00392156862745098}, [0, 5, 11, 23]),
]


def limits(cfg):
    if "min_pixels" in cfg:
        return cfg["min_pixels"], cfg["max_pixels"]
    return cfg["size"]["shortest_edge"], cfg["size"]["longest_edge"]


def f32_text(v):
    """Shortest decimal text that reads back as the same f32."""
    return float(np.format_float_positional(np.float32(v), unique=True))


def main():
    os.makedirs(OUT, exist_ok=True)
    cases = []
    for i, (name, (h, w), mode, cfg, keep_rows) in enumerate(CASES):
        channels = {"RGB": 3, "RGBA": 4, "L": 1}[mode]
        arr = pattern(h, w, channels, seed=100 + i)
        if mode == "RGBA":
            arr[..., 3] = (np.arange(w)[None, :] * 8 % 256).astype(np.uint8)
        png = f"{name}.png"
        Image.fromarray(arr, mode=mode).save(os.path.join(OUT, png))
        image = Image.open(os.path.join(OUT, png))
        image.load()
        assert image.mode == mode and image.size == (w, h)

        min_px, max_px = limits(cfg)
        mean, std = cfg.get("image_mean", 0.5), cfg.get("image_std", 0.5)
        proc = Qwen2VLImageProcessor()
        # Every setting passed explicitly: the slow processor's __init__ drops a `size` dict.
        out = proc.preprocess(
            [image],
            size={"shortest_edge": min_px, "longest_edge": max_px},
            patch_size=cfg["patch_size"],
            temporal_patch_size=cfg["temporal_patch_size"],
            merge_size=cfg["merge_size"],
            image_mean=mean if isinstance(mean, list) else [mean] * 3,
            image_std=std if isinstance(std, list) else [std] * 3,
            rescale_factor=cfg.get("rescale_factor", 1 / 255),
            return_tensors=None,
        )
        pv = np.asarray(out["pixel_values"], dtype=np.float32)
        grid = [int(g) for g in np.asarray(out["image_grid_thw"])[0]]
        ps = cfg["patch_size"]
        resized = [grid[1] * ps, grid[2] * ps]
        rows, cols = pv.shape
        assert rows == grid[0] * grid[1] * grid[2]
        weights = np.arange(1, cols + 1, dtype=np.float64)
        case = {
            "name": name,
            "image": png,
            "mode": mode,
            "original_hw": [h, w],
            "preprocessor_config": cfg,
            "resized_hw": resized,
            "grid_thw": grid,
            "shape": [rows, cols],
            # Per row: sum of values, and sum of (column + 1) * value (catches column order).
            "row_sums": [float(s) for s in pv.astype(np.float64).sum(axis=1)],
            "row_weighted_sums": [float(s) for s in (pv.astype(np.float64) * weights).sum(axis=1)],
        }
        if keep_rows is None:
            case["pixel_values"] = [f32_text(v) for v in pv.reshape(-1)]
        else:
            case["sampled_rows"] = {str(r): [f32_text(v) for v in pv[r]] for r in keep_rows}
        cases.append(case)
        print(f"{name}: {h}x{w} {mode} -> {resized} grid {grid} pixel_values {pv.shape}")

    doc = {
        "generator": "scripts/vl/make_preprocess_fixture.py",
        "processor": "transformers Qwen2VLImageProcessor (slow, PIL bicubic)",
        "transformers_version": transformers.__version__,
        "pillow_version": PIL.__version__,
        "numpy_version": np.__version__,
        "cases": cases,
    }
    with open(os.path.join(OUT, "preprocess_fixture.json"), "w") as f:
        json.dump(doc, f, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
