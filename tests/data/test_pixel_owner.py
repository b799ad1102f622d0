"""One owner for "pixels -> model input": no module of src/vitlab but vitlab/data/preprocess.py computes
``(x - mean) / std``, passes a loose mean and std to a normaliser, or picks an image resampling filter.

Everyone else asks a :class:`~vitlab.data.DataConfig` (``eval_transform``, ``normalize``), the splits
(``splits.normalize``) or a :class:`~vitlab.data.preprocess.Statistics`. Nearest-neighbour blow-ups of
masks and overlays for display are not a model's input and stay where they are drawn."""

import io
import re
import tokenize
from pathlib import Path

import vitlab

SRC = Path(vitlab.__file__).parent
OWNER = "data/preprocess.py"
PATTERNS = {
    "(x - mean) / std": re.compile(r"-\s*[\w.]*mean\w*\s*\)\s*/\s*[\w.]*std\b"),
    "in-place normalisation": re.compile(r"\.sub_\([^)]*mean|\.div_\([^)]*std"),
    "a loose mean and std": re.compile(r"(?<![\w.])normalize_?\([^()]*(\([^()]*\))?[^()]*\bmean\b"),
    "torchvision's resampling": re.compile(r"InterpolationMode|transforms\.(Resize|CenterCrop|Normalize)\b"),
    "PIL's resampling": re.compile(r"Resampling\.(BILINEAR|BICUBIC|LANCZOS|BOX|HAMMING)|Image\.(BILINEAR|BICUBIC)"),
    "a resize of image tensors": re.compile(r"interpolate\((images?|pixels|image\[None\])\b"),
}


def code_lines(source: str) -> dict[int, str]:
    """``{line number: its code}``, strings (docstrings, messages) and comments left out."""
    text = {tokenize.STRING, tokenize.COMMENT, getattr(tokenize, "FSTRING_MIDDLE", tokenize.STRING)}
    lines: dict[int, str] = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        (row, column), (end_row, _) = token.start, token.end
        if token.type not in text and row == end_row and token.string.strip():
            line = lines.get(row, "")
            lines[row] = line + " " * max(column - len(line), 0) + token.string
    return lines


def offenders() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        name = path.relative_to(SRC).as_posix()
        if name == OWNER:
            continue
        for number, code in code_lines(path.read_text()).items():
            found.setdefault(name, []).extend(
                f"{name}:{number}: {what}: {code}" for what, pattern in PATTERNS.items() if pattern.search(code)
            )
    return {name: lines for name, lines in found.items() if lines}


def test_only_the_owner_normalises_or_resamples_pixels():
    found = offenders()
    unexpected = [line for name, lines in found.items() for line in lines]
    assert not unexpected, "\n".join(unexpected)


def test_the_scan_sees_what_it_forbids():
    owner = (SRC / OWNER).read_text()
    assert PATTERNS["PIL's resampling"].search("im.resize((s, s), Image.Resampling.BICUBIC)")
    assert PATTERNS["(x - mean) / std"].search("return (images - self.mean) / self.std")
    assert PATTERNS["a loose mean and std"].search("normalize(data.images.to(device), splits.mean, splits.std)")
    assert PATTERNS["a resize of image tensors"].search('F.interpolate(images, size=s, mode="bilinear")')
    assert PATTERNS["torchvision's resampling"].search(owner)
    assert not PATTERNS["a loose mean and std"].search("splits.normalize(images)")
