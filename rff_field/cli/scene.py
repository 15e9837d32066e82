"""``rff-scene``: generate the synthetic scenes the tests and the demo use, as datasets nerfstudio reads.

Subcommands:
    blender  the demo's objects in a void (transparent background): transforms_{train,val,test}.json (Blender format)
    capture  the same objects on a ground plane under a sky, cameras around them: transforms.json (nerfstudio-data)
"""

from __future__ import annotations

import math
import shlex
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Callable, Optional, Union

import tyro

from rff_field.cli.common import run_command
from rff_field.common.options import Flat
from rff_field.common.outputs import check_writable_folder
from rff_field.common.stopping import sigterm_as_interrupt
from rff_field.core.errors import UsageError
from rff_field.nerf.synthetic_scene import CaptureSpec, SceneSpec, write_blender_scene, write_nerfstudio_capture


def _generate(out: Path, spec: Any, minimums: dict[str, int], write: Callable[..., Path], method: str) -> Path:
    """Check that ``out`` can be written and the spec's counts (``minimums``: field name -> least value), then write
    with a progress bar and print the ``ns-train`` command for ``method``."""
    check_writable_folder(out, "--out")  # the writers refuse a folder with files in it
    for name, minimum in minimums.items():
        if getattr(spec, name) < minimum:
            raise UsageError(f"--{name.replace('_', '-')} must be at least {minimum}, got {getattr(spec, name)}")
    existed = out.exists()
    was_empty = not existed or not any(out.iterdir())
    try:
        with sigterm_as_interrupt():
            write(out, spec, progress=True)
    except BaseException:  # Ctrl-C, kill or an error: no half-written scene stays to be refused by the next run
        if was_empty and out.is_dir():
            for path in out.iterdir():
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path)
                else:
                    path.unlink()
            if not existed:
                out.rmdir()
        raise
    print(f"wrote {out}; train on it with: ns-train {method} --data {shlex.quote(str(out))} --machine.device-type cpu")
    return out


@dataclass
class Blender:
    """Render the demo's objects (a checkered slab, a cube with one colour per face, a striped cylinder, a sphere)
    in a void, and write them as a Blender-format scene for ``rff-nerf`` and the ``blender-data`` parser."""

    out: Path
    """Folder to create (new or empty)."""
    spec: Annotated[SceneSpec, Flat] = field(default_factory=SceneSpec)

    def main(self) -> Path:
        """Check the options, render every view with a progress bar, print the command that trains on it."""
        minimums = {"image_size": 8, "num_train": 1, "num_val": 1, "num_test": 1, "supersample": 1, "seed": 0}
        return _generate(self.out, self.spec, minimums, write_blender_scene, "rff-nerf-lite")


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
        spec = self.spec
        if not 0 < spec.distance_min <= spec.distance_max < math.inf:
            distances = f"{spec.distance_min} and {spec.distance_max}"
            raise UsageError(f"need 0 < --distance-min <= --distance-max, both finite, got {distances}")
        minimums = {"image_size": 8, "num_views": 10, "supersample": 1, "seed": 0}  # ns-train evaluates one view in ten
        return _generate(self.out, spec, minimums, write_nerfstudio_capture, "rff-nerfacto-lite")


Command = Union[
    Annotated[Blender, tyro.conf.subcommand("blender")],
    Annotated[Capture, tyro.conf.subcommand("capture")],
]


def entrypoint(args: Optional[list[str]] = None) -> None:
    """Console script ``rff-scene``: user errors print one line and exit with status 2."""
    run_command("rff-scene", Command, __doc__, args=args)


if __name__ == "__main__":
    entrypoint()
