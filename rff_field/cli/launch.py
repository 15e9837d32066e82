"""The console scripts. Each imports its command inside, so that a Ctrl-C while torch and nerfstudio load (a few
seconds) ends with one line and exit status 130, as it does later, instead of a traceback."""

from __future__ import annotations

import importlib
import sys
from functools import partial


def launch(module: str, prog: str) -> None:
    """Import ``rff_field.cli.<module>`` and run its ``entrypoint``."""
    try:
        entrypoint = importlib.import_module(f"rff_field.cli.{module}").entrypoint
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        sys.exit(130)
    entrypoint()


rff_image = partial(launch, "image", "rff-image")
rff_sdf = partial(launch, "sdf", "rff-sdf")
rff_export_mesh = partial(launch, "export_mesh", "rff-export-mesh")
rff_demo = partial(launch, "demo", "rff-demo")
rff_bench = partial(launch, "bench", "rff-bench")
rff_scene = partial(launch, "scene", "rff-scene")
