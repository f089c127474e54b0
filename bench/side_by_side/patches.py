"""The released code's copy: check the checkout, copy it, patch the copy (the patches are data: patches.yaml).

The patches are read from patches.yaml (name, file, what to find, what to put, how often, why). apply_patches
checks every target before it writes any file, so a checkout that is not the released code, or a copy patched
before, ends in a PatchError naming the patch and the file, with nothing written.
"""

from __future__ import annotations

import dataclasses
import shutil
import string
from pathlib import Path
from typing import Any

import yaml

from . import ALL_SESSIONS, ToolError

PATCH_FILE = Path(__file__).with_name("patches.yaml")
RELEASED_FILES = (
    "train.py", "utils.py", "models/adbs/fscil_trainer.py", "models/adbs/helper.py", "models/adbs/Network.py",
    "models/resnet12.py", "dataloader/data_utils.py", "dataloader/cifar100/cifar.py",
)
MARK = "# vs_official"  # ends every line a patch in patches.yaml adds where a comment fits
PATCHED = "VS_OFFICIAL_PATCHES.txt"  # written into a patched copy: the patches, one a line
_KEYS = {"name", "file", "find", "put", "count", "why"}  # one entry of patches.yaml


class PatchError(ToolError):
    """A patch target is missing (not the released code, or a modified copy) or the copy is already patched."""


@dataclasses.dataclass(frozen=True)
class Patch:
    name: str
    file: str
    old: str
    new: str
    count: int
    why: str

    def describe(self) -> str:
        return f"{self.name:<13} {self.file} ({self.count} site{'s' if self.count > 1 else ''}): {self.why}"


def released_patches(device: str = "cuda", sessions: int = ALL_SESSIONS) -> list[Patch]:
    """The patches a run needs (patches.yaml: always; `cpu` with device cpu; `fewer_sessions` below 8 sessions)."""
    groups = yaml.safe_load(PATCH_FILE.read_text())
    chosen = (groups["always"] + (groups["cpu"] if device == "cpu" else [])
              + (groups["fewer_sessions"] if sessions != ALL_SESSIONS else []))
    values = {"sessions": sessions, "released_sessions": 1 + sessions}
    return [_patch(entry, values) for entry in chosen]


def _patch(entry: dict[str, Any], values: dict[str, int]) -> Patch:
    """One entry of patches.yaml, its `$sessions` and `$released_sessions` filled in."""
    if set(entry) != _KEYS:
        raise ValueError(f"{PATCH_FILE}: the entry {entry.get('name', entry)!r} has keys {sorted(entry)}; expected "
                         f"{sorted(_KEYS)}")

    def fill(text: str) -> str:
        return string.Template(text).substitute(values)

    return Patch(name=entry["name"], file=entry["file"], old=fill(entry["find"]), new=fill(entry["put"]),
                 count=int(entry["count"]), why=fill(entry["why"]))


def check_released_checkout(root: Path) -> None:
    """The folder holds the released ADBS code (its files); patch targets are checked by apply_patches."""
    if not root.exists():
        raise ToolError(f"--official {root}: no such folder; pass the path of a checkout of the authors' ADBS code "
                        "(github.com/Yongzhang-Tan/ADBS)")
    if not root.is_dir():
        raise ToolError(f"--official {root} is not a folder; pass the checkout's root folder (it holds train.py)")
    missing = [f for f in RELEASED_FILES if not (root / f).is_file()]
    if missing:
        raise ToolError(f"--official {root} is not the ADBS code: it lacks {', '.join(missing)}; pass the root of a "
                        "checkout of github.com/Yongzhang-Tan/ADBS (it holds train.py and models/adbs/)")
    train = (root / "train.py").read_text(errors="replace")
    if "'-margin'" not in train or "fscil_trainer" not in train:
        raise ToolError(f"--official {root}: train.py has no -margin option or does not load models.<project>."
                        "fscil_trainer; this is not the ADBS code's train.py")


def apply_patches(root: Path, patches: list[Patch]) -> list[Patch]:
    """Apply every patch exactly once to the files under root; check them all before writing any file.

    A patch whose target text is not found exactly `count` times raises PatchError naming the patch, the file
    and what was expected; so does a copy patched before (its PATCHED file, or MARK in a file to patch).
    """
    if (root / PATCHED).exists():
        raise PatchError(f"{root} is already patched ({PATCHED} lists its patches); patch a fresh copy of the checkout")
    texts: dict[str, str] = {}
    done: set[str] = set()
    for p in patches:
        path = root / p.file
        if p.file not in texts:
            if not path.is_file():
                raise PatchError(f"patch {p.name}: {p.file} is missing from {root}; this is not the released ADBS code")
            texts[p.file] = path.read_text()
        s = texts[p.file]
        if MARK in s and p.file not in done:
            raise PatchError(f"patch {p.name}: {p.file} in {root} is already patched ({MARK!r} in it); patch a fresh "
                             "copy of the checkout")
        done.add(p.file)
        found = s.count(p.old)
        if found != p.count:
            raise PatchError(
                f"patch {p.name}: expected {p.count} occurrence(s) of {p.old.strip()[:90]!r} in {p.file}, found "
                f"{found}; this checkout differs from the released ADBS code (commit a09f41e) the patches were "
                "written for. Use an unmodified checkout of that commit, or update bench/side_by_side/patches.yaml "
                "for this version")
        texts[p.file] = s.replace(p.old, p.new)
    for f, s in texts.items():
        (root / f).write_text(s)
    (root / PATCHED).write_text("".join(p.describe() + "\n" for p in patches))
    return patches


def copy_released(src: Path, dst: Path) -> None:
    """Copy the checkout without its .git, checkpoints and data (the tool writes data/index_list itself)."""
    def ignore(folder: str, names: list[str]) -> list[str]:
        top = Path(folder).resolve() == src.resolve()
        return [n for n in names if n in (".git", "__pycache__") or (top and n in ("checkpoint", "data"))]

    shutil.copytree(src, dst, ignore=ignore)
