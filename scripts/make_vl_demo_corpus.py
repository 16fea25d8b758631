#!/usr/bin/env python3
"""Generate the image-text demo assets: ``hyper_parallel/assets/tokenizer_vl/`` and ``vl_corpus/``.

Why generated: the project trains offline and ships only self-made data. The images are simple
enough (1-4 shapes of one kind and one colour on a plain background) that a tiny vision-language
model can learn to answer colour / shape / count questions about them in a short smoke run, so
the loss of a VL run falls visibly.

Outputs:

* ``tokenizer_vl/tokenizer.json`` -- the shipped 2048-token BPE (``assets/tokenizer``) with Qwen's
  chat and vision special tokens appended as added special tokens, ids 2048..2053 in the order of
  :data:`SPECIAL_TOKENS`; ``tokenizer_vl/tokenizer_config.json`` -- eos = pad = ``<|endoftext|>``
  (id 0) as in the text tokenizer, so text data encodes the same with either.
* ``vl_corpus/images/NNNN.png`` -- :data:`NUM_IMAGES` RGB images of 64x64, 64x96 or 96x64 px
  (height x width). Every side is a multiple of 32 = patch 16 x merge 2, so the image processor
  never resizes them: a 64x64 image is 4x4 patches = 4 placeholder tokens, the others 6.
* ``vl_corpus/train.jsonl`` / ``valid.jsonl`` -- one record per line, the legacy VL format:
  ``{"messages": [{"role": "user", "content": ...}, {"role": "assistant", "content": ...}],
  "image": "images/0007.png"}`` (``image`` is relative to the jsonl file; a list for the
  two-image records; absent for the few text-only records). Images 0..179 are asked about in
  train, the last :data:`NUM_VALID_IMAGES` only in valid.
* ``vl_corpus/preprocessor_config.json`` -- the ``Qwen2VLImageProcessor`` settings for these
  images (:data:`PROCESSOR_CONFIG`), so ``image_processor("pkg://vl_corpus")`` loads them:
  Qwen3-VL's patch 16 / temporal patch 2 / merge 2 and mean = std = 0.5, with ``min_pixels`` =
  32*32 (one merged token: small images are kept, not upscaled to Qwen's default 256*256, which
  would give 64 tokens each) and ``max_pixels`` = 128*128 (at most 16 tokens per image, should a
  larger picture be added).

Determinism: one ``random.Random(SEED)`` drives every choice, so the text files are
byte-identical on every run; PNG bytes depend on the zlib build, so ``--check`` compares the
images by their decoded pixels and the other files byte for byte (exit 1 on a difference).

Usage::

    python scripts/make_vl_demo_corpus.py            # (re)write the files
    python scripts/make_vl_demo_corpus.py --check    # verify the committed files are reproducible
"""

from __future__ import annotations

import argparse
import io
import json
import random
import sys
from pathlib import Path

from PIL import Image, ImageDraw
from tokenizers import AddedToken, Tokenizer

SEED = 20250613
NUM_IMAGES = 200
NUM_VALID_IMAGES = 20

ASSETS = Path(__file__).resolve().parent.parent / "hyper_parallel" / "assets"
BASE_TOKENIZER = ASSETS / "tokenizer" / "tokenizer.json"

#: Appended to the base vocabulary in this order: ids 2048..2053.
SPECIAL_TOKENS = ("<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
                  "<|image_pad|>", "<|video_pad|>")

# The base tokenizer's settings (written by scripts/train_tokenizer.py), plus the new tokens.
TOKENIZER_CONFIG = {
    **json.loads((BASE_TOKENIZER.parent / "tokenizer_config.json").read_text()),
    "additional_special_tokens": list(SPECIAL_TOKENS),
}

MIN_PIXELS = 32 * 32
MAX_PIXELS = 128 * 128
PROCESSOR_CONFIG = {
    "image_processor_type": "Qwen2VLImageProcessor",
    "do_convert_rgb": True,
    "do_resize": True,
    "resample": 3,
    "do_rescale": True,
    "rescale_factor": 1 / 255,
    "do_normalize": True,
    "image_mean": [0.5, 0.5, 0.5],
    "image_std": [0.5, 0.5, 0.5],
    "patch_size": 16,
    "temporal_patch_size": 2,
    "merge_size": 2,
    "min_pixels": MIN_PIXELS,
    "max_pixels": MAX_PIXELS,
    "size": {"shortest_edge": MIN_PIXELS, "longest_edge": MAX_PIXELS},
}

COLOURS = {"red": (220, 40, 40), "green": (40, 170, 70), "blue": (40, 80, 220),
           "yellow": (240, 210, 40), "purple": (140, 60, 180), "orange": (250, 140, 30)}
BACKGROUNDS = {"white": (255, 255, 255), "grey": (150, 150, 150), "black": (15, 15, 15)}
KINDS = ("circle", "square", "triangle")
SIZES = ((64, 64), (64, 64), (64, 96), (96, 64))  # (height, width); 64x64 twice as likely
CELL = 32  # shapes sit in a grid of 32x32 cells, one shape per cell, so they never overlap
NUMBERS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight")


# --------------------------------------------------------------------------------------------
# Images
# --------------------------------------------------------------------------------------------


def make_spec(rng: random.Random) -> dict:
    height, width = rng.choice(SIZES)
    cells = [(r, c) for r in range(height // CELL) for c in range(width // CELL)]
    count = rng.randint(1, 4)
    colour = rng.choice(list(COLOURS))
    background = rng.choice([b for b in BACKGROUNDS
                             if not (b == "white" and colour == "yellow")])  # keep it visible
    shapes = []
    for row, col in sorted(rng.sample(cells, count)):
        size = rng.randint(16, 26)
        x0 = col * CELL + rng.randint(0, CELL - size)
        y0 = row * CELL + rng.randint(0, CELL - size)
        shapes.append((x0, y0, size))
    return {"height": height, "width": width, "kind": rng.choice(KINDS), "colour": colour,
            "background": background, "shapes": shapes}


def draw(spec: dict) -> Image.Image:
    image = Image.new("RGB", (spec["width"], spec["height"]), BACKGROUNDS[spec["background"]])
    pen = ImageDraw.Draw(image)
    fill = COLOURS[spec["colour"]]
    for x0, y0, size in spec["shapes"]:
        box = (x0, y0, x0 + size - 1, y0 + size - 1)
        if spec["kind"] == "circle":
            pen.ellipse(box, fill=fill)
        elif spec["kind"] == "square":
            pen.rectangle(box, fill=fill)
        else:
            pen.polygon([(x0 + (size - 1) / 2, y0), (x0, y0 + size - 1),
                         (x0 + size - 1, y0 + size - 1)], fill=fill)
    return image


def png_bytes(image: Image.Image) -> bytes:
    buf = io.BytesIO()
    image.save(buf, format="PNG", optimize=True)
    return buf.getvalue()


# --------------------------------------------------------------------------------------------
# Questions and answers
# --------------------------------------------------------------------------------------------


def plural(kind: str, n: int) -> str:
    return kind if n == 1 else kind + "s"


def describe(spec: dict) -> str:
    n = len(spec["shapes"])
    return f"{NUMBERS[n]} {spec['colour']} {plural(spec['kind'], n)}"


def questions(spec: dict, rng: random.Random) -> list[tuple[str, str]]:
    """Every question one image can answer, with its answer."""
    n, kind = len(spec["shapes"]), spec["kind"]
    other = rng.choice([k for k in KINDS if k != kind])
    one = n == 1
    return [
        ("What colour is the shape?" if one else "What colour are the shapes?", spec["colour"]),
        ("What shape is it?" if one else "What shape are they?", kind),
        (rng.choice(["How many shapes are there?", "How many shapes?"]), NUMBERS[n]),
        (f"How many {kind}s?", NUMBERS[n]),
        (f"How many {other}s?", "zero"),
        ("What colour is the background?", spec["background"]),
        (rng.choice(["Describe the image.", "What do you see?"]), describe(spec)),
    ]


def chat(*turns: str) -> list[dict]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": text}
            for i, text in enumerate(turns)]


def image_records(index: int, spec: dict, rng: random.Random) -> list[dict]:
    path = f"images/{index:04d}.png"
    pool = questions(spec, rng)
    picked = rng.sample(pool, 3)
    records = [{"messages": chat(q, a), "image": path} for q, a in picked]
    if index % 5 == 0:  # a two-turn conversation about the same image
        (q1, a1), (q2, a2) = rng.sample(pool, 2)
        records.append({"messages": chat(q1, a1, q2, a2), "image": path})
    return records


def pair_record(first: tuple[int, dict], second: tuple[int, dict]) -> dict:
    """A two-image record (``image`` is a list): which image holds more shapes."""
    (i, a), (j, b) = first, second
    na, nb = len(a["shapes"]), len(b["shapes"])
    answer = "the first" if na > nb else "the second" if nb > na else "neither, they have the same"
    return {"messages": chat("Which image has more shapes, the first or the second?", answer),
            "image": [f"images/{i:04d}.png", f"images/{j:04d}.png"]}


def text_records(rng: random.Random, count: int) -> list[dict]:
    """Records without an image: the model must also answer plain text questions."""
    out = []
    for _ in range(count):
        kind = rng.randrange(3)
        if kind == 0:
            n = rng.randint(0, 7)
            out.append({"messages": chat(f"What number comes after {NUMBERS[n]}?",
                                         NUMBERS[n + 1])})
        elif kind == 1:
            k = rng.choice(KINDS)
            sides = {"circle": "zero", "square": "four", "triangle": "three"}[k]
            out.append({"messages": chat(f"How many corners does a {k} have?", sides)})
        else:
            colours = rng.sample(list(COLOURS), 2)
            out.append({"messages": chat(f"Name a colour: {colours[0]} or {colours[1]}?",
                                         colours[rng.randrange(2)])})
    return out


def generate() -> tuple[dict[str, bytes], dict[str, Image.Image]]:
    """The text files (bytes) and the images, by path relative to ``assets``."""
    rng = random.Random(SEED)
    specs = [make_spec(rng) for _ in range(NUM_IMAGES)]
    split = NUM_IMAGES - NUM_VALID_IMAGES
    splits: dict[str, list[dict]] = {"train": [], "valid": []}
    for index, spec in enumerate(specs):
        splits["train" if index < split else "valid"].extend(image_records(index, spec, rng))
    for name, lo, hi, pairs, texts in (("train", 0, split, 40, 20),
                                       ("valid", split, NUM_IMAGES, 4, 2)):
        for _ in range(pairs):
            i, j = rng.sample(range(lo, hi), 2)
            splits[name].append(pair_record((i, specs[i]), (j, specs[j])))
        splits[name].extend(text_records(rng, texts))
        rng.shuffle(splits[name])

    files: dict[str, bytes] = {}
    for name, records in splits.items():
        lines = "".join(json.dumps(r, ensure_ascii=True) + "\n" for r in records)
        files[f"vl_corpus/{name}.jsonl"] = lines.encode("utf-8")
    files["vl_corpus/preprocessor_config.json"] = _json(PROCESSOR_CONFIG)
    files["tokenizer_vl/tokenizer.json"] = vl_tokenizer_json().encode("utf-8")
    files["tokenizer_vl/tokenizer_config.json"] = _json(TOKENIZER_CONFIG)
    images = {f"vl_corpus/images/{i:04d}.png": draw(spec) for i, spec in enumerate(specs)}
    return files, images


# --------------------------------------------------------------------------------------------
# Tokenizer
# --------------------------------------------------------------------------------------------


def vl_tokenizer_json() -> str:
    tok = Tokenizer.from_file(str(BASE_TOKENIZER))
    base = tok.get_vocab_size(with_added_tokens=True)
    added = tok.add_special_tokens([AddedToken(t, special=True, normalized=False)
                                    for t in SPECIAL_TOKENS])
    ids = [tok.token_to_id(t) for t in SPECIAL_TOKENS]
    if added != len(SPECIAL_TOKENS) or ids != list(range(base, base + len(SPECIAL_TOKENS))):
        raise SystemExit(f"the base tokenizer {BASE_TOKENIZER} already has some of "
                         f"{SPECIAL_TOKENS} (ids {ids}); expected them new at {base}..")
    return tok.to_str(pretty=True) + "\n"


def _json(obj: dict) -> bytes:
    return (json.dumps(obj, indent=2) + "\n").encode("utf-8")


# --------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------


def check(out: Path, files: dict[str, bytes], images: dict[str, Image.Image]) -> list[str]:
    bad = [name for name, content in files.items()
           if not (out / name).is_file() or (out / name).read_bytes() != content]
    for name, image in images.items():
        path = out / name
        if not path.is_file():
            bad.append(name)
            continue
        with Image.open(path) as shipped:
            if shipped.size != image.size or shipped.convert("RGB").tobytes() != image.tobytes():
                bad.append(name)
    shipped = {str(p.relative_to(out)) for p in (out / "vl_corpus" / "images").glob("*.png")}
    return bad + [f"{name} (not generated)" for name in sorted(shipped - set(images))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out-dir", type=Path, default=ASSETS,
                        help="the assets folder that receives tokenizer_vl/ and vl_corpus/")
    parser.add_argument("--check", action="store_true",
                        help="compare with the files in --out-dir instead of writing them")
    args = parser.parse_args(argv)

    files, images = generate()
    if args.check:
        bad = check(args.out_dir, files, images)
        if bad:
            more = " ..." if len(bad) > 10 else ""
            print(f"VL demo assets differ from the generator output: {', '.join(bad[:10])}"
                  f"{more}; rerun `python scripts/make_vl_demo_corpus.py`", file=sys.stderr)
            return 1
        print("VL demo assets are up to date")
        return 0
    total = 0
    for name, content in files.items():
        path = args.out_dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
        total += len(content)
    for name, image in images.items():
        path = args.out_dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        data = png_bytes(image)
        path.write_bytes(data)
        total += len(data)
    print(f"wrote {len(files)} files and {len(images)} images, {total / 1e3:.0f} KB, "
          f"under {args.out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
