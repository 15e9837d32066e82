"""``rff-scene``: the synthetic scenes of the demo and the tests as datasets nerfstudio reads: ``blender`` (objects in
a void, Blender format) and ``capture`` (on a ground plane under a sky, nerfstudio-data)."""

from __future__ import annotations

import shlex
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Optional, Sequence, Union

import tyro

from rff_field.cli.common import run_command
from rff_field.common.machine import check_memory
from rff_field.common.options import Flat
from rff_field.common.outputs import claimed_folder, clear_folder
from rff_field.core.errors import UsageError
from rff_field.nerf.synthetic_scene import CaptureSpec, SceneSpec, write_blender_scene, write_nerfstudio_capture


def generate(out: Path, spec, write, method: str) -> Path:
    """Check ``out`` and ``spec``, write the scene with a progress bar (removing what it wrote if it stops) and print
    the ``ns-train`` command for ``method``."""
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UsageError(f"--output-dir {out} exists and is not an empty folder; choose a new one")
    spec.check()
    check_view_counts(out, spec)
    existed = out.exists()
    try:
        with claimed_folder(out, "--output-dir"):
            try:
                write(out, spec, progress=True)
            except BaseException:  # Ctrl-C or an error: leave no half-written scene
                clear_folder(out)
                raise
    except BaseException:
        if not existed and out.is_dir() and not any(out.iterdir()):
            out.rmdir()
        raise
    print(f"wrote {out}; train on it with: ns-train {method} --data {shlex.quote(str(out))}")
    return out


VIEW_BYTES = 1024
"""Memory a view's pose and frame take before the images are written."""


def check_view_counts(out: Path, spec) -> None:
    """Raise :class:`UsageError` naming the largest view count when the views' poses cannot fit in memory or their
    images (at most 4 bytes a pixel) on the disk holding ``out``."""
    counts = {"--num-views": spec.num_views} if isinstance(spec, CaptureSpec) else {
        "--num-train-views": spec.num_train_views, "--num-val-views": spec.num_val_views,
        "--num-test-views": spec.num_test_views}  # fmt: skip
    option = max(counts, key=counts.get)
    others = sum(counts.values()) - counts[option]
    check_memory(option, counts[option], lambda views: VIEW_BYTES * (views + others))
    disk = next(folder for folder in [out, *out.absolute().parents] if folder.exists())
    free, per_view = shutil.disk_usage(disk).free, 4 * spec.image_size**2
    if (counts[option] + others) * per_view > free:
        need, largest = (counts[option] + others) * per_view / 2**30, max(0, free // per_view - others)
        raise UsageError(f"{option} {counts[option]}: the images would take up to {need:.3g} GiB and {disk} has "
                         f"{free / 2**30:.3g} GiB free; the largest that fits is {largest}")  # fmt: skip


@dataclass
class Blender:
    """Render objects in a void as a Blender-format scene for the blender-data parser: by default a checkered slab, a
    cube with one colour per face, a striped cylinder and a sphere; --kind thin, texture, cup or large for others."""

    output_dir: Path
    """Folder to create (new or empty)."""
    spec: Annotated[SceneSpec, Flat] = field(default_factory=SceneSpec)

    def main(self) -> Path:
        return generate(self.output_dir, self.spec, write_blender_scene, "rff-nerf-lite")


@dataclass
class Capture:
    """Render the objects on a textured ground plane reaching 12 units out, under a sky at infinity, from cameras
    around them, as a nerfstudio-data capture (transforms.json, images/) like those ns-process-data writes."""

    output_dir: Path
    """Folder to create (new or empty)."""
    spec: Annotated[CaptureSpec, Flat] = field(default_factory=CaptureSpec)

    def main(self) -> Path:
        return generate(self.output_dir, self.spec, write_nerfstudio_capture, "rff-nerfacto-lite")


Command = Union[
    Annotated[Blender, tyro.conf.subcommand("blender")], Annotated[Capture, tyro.conf.subcommand("capture")]
]


def entrypoint(args: Optional[Sequence[str]] = None) -> None:
    """Console script ``rff-scene``."""
    run_command("rff-scene", Command, __doc__, args)


if __name__ == "__main__":
    entrypoint()
