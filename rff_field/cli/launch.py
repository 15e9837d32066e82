"""The console scripts. Each imports its command inside, so that a Ctrl-C while torch and nerfstudio load (a few
seconds) ends with one line and exit status 130, as it does later, instead of a traceback."""

from __future__ import annotations

import importlib
import sys


def launch(module: str, prog: str) -> None:
    """Import ``rff_field.cli.<module>`` and run its ``entrypoint``."""
    try:
        entrypoint = importlib.import_module(f"rff_field.cli.{module}").entrypoint
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        sys.exit(130)
    entrypoint()


def rff_image() -> None:
    launch("image", "rff-image")


def rff_sdf() -> None:
    launch("sdf", "rff-sdf")


def rff_export_mesh() -> None:
    launch("export_mesh", "rff-export-mesh")


def rff_demo() -> None:
    launch("demo", "rff-demo")


def rff_bench() -> None:
    launch("bench", "rff-bench")


def rff_scene() -> None:
    launch("scene", "rff-scene")
