"""``rff-scene``: generate the synthetic scenes the tests and the demo use, as datasets nerfstudio reads.

Subcommands:
    blender  the demo's objects in a void (transparent background): transforms_{train,val,test}.json (Blender format)
    capture  the same objects on a ground plane under a sky, cameras around them: transforms.json (nerfstudio-data)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Optional, Union

import tyro

from rff_field.cli.common import run_command
from rff_field.common.options import Flat
from rff_field.common.outputs import check_writable_folder
from rff_field.core.errors import UsageError
from rff_field.nerf.synthetic_scene import CaptureSpec, SceneSpec, write_blender_scene, write_nerfstudio_capture


def _check_new_folder(out: Path) -> None:
    check_writable_folder(out, "--out")
    if out.is_dir() and any(out.iterdir()):
        raise UsageError(f"--out {out} is not empty; choose a new folder (nothing in it is replaced)")


def _check_at_least(values: dict[str, int], minimum: int) -> None:
    for name, value in values.items():
        if value < minimum:
            raise UsageError(f"--{name.replace('_', '-')} must be at least {minimum}, got {value}")


@dataclass
class Blender:
    """Render the demo's objects (a checkered slab, a cube with one colour per face, a striped cylinder, a sphere)
    in a void, and write them as a Blender-format scene for ``rff-nerf`` and the ``blender-data`` parser."""

    out: Path
    """Folder to create (new or empty)."""
    spec: Annotated[SceneSpec, Flat] = field(default_factory=SceneSpec)

    def main(self) -> Path:
        """Check the options, render every view with a progress bar, print the command that trains on it."""
        _check_new_folder(self.out)
        spec = self.spec
        _check_at_least({"image_size": spec.image_size}, 4)
        _check_at_least({"num_train": spec.num_train, "num_val": spec.num_val, "num_test": spec.num_test}, 1)
        _check_at_least({"supersample": spec.supersample}, 1)
        write_blender_scene(self.out, spec, progress=True)
        command = f"ns-train rff-nerf-lite --data {self.out} --machine.device-type cpu"
        print(f"wrote {self.out}; train on it with: {command}")
        return self.out


@dataclass
class Capture:
    """Render the demo's objects on a textured ground plane reaching 12 units out, under a sky at infinity, from
    cameras around them, and write a nerfstudio-data capture (``transforms.json``, ``images/``): an unbounded
    scene in the format ``ns-process-data`` writes, for ``rff-nerfacto``."""

    out: Path
    """Folder to create (new or empty)."""
    spec: Annotated[CaptureSpec, Flat] = field(default_factory=CaptureSpec)

    def main(self) -> Path:
        """Check the options, render every photo with a progress bar, print the command that trains on it."""
        _check_new_folder(self.out)
        spec = self.spec
        _check_at_least({"image_size": spec.image_size}, 4)
        _check_at_least({"num_views": spec.num_views}, 2)
        _check_at_least({"supersample": spec.supersample}, 1)
        if not 0 < spec.distance_min <= spec.distance_max:
            raise UsageError(
                f"need 0 < --distance-min <= --distance-max, got {spec.distance_min} and {spec.distance_max}"
            )
        write_nerfstudio_capture(self.out, spec, progress=True)
        command = f"ns-train rff-nerfacto-lite --data {self.out} --machine.device-type cpu"
        print(f"wrote {self.out}; train on it with: {command}")
        return self.out


Command = Union[
    Annotated[Blender, tyro.conf.subcommand("blender")],
    Annotated[Capture, tyro.conf.subcommand("capture")],
]


def entrypoint(args: Optional[list[str]] = None) -> None:
    """Console script ``rff-scene``: user errors print one line and exit with status 2."""
    run_command("rff-scene", Command, __doc__, args=args)


if __name__ == "__main__":
    entrypoint()
