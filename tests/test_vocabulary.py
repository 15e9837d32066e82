"""One vocabulary: every console command spells a concept the same way (nerfstudio's word where it has one), and the
retired spellings are gone."""

import contextlib
import importlib
import io
import re

import pytest
import tyro

WORDS = {
    "output folder": "--output-dir",
    "output file": "--output-path",
    "training length in optimizer steps": "--steps",
    "training length in passes over an image": "--passes",
    "resolution as a multiple of the data's": "--resolution-scale",
    "grid points per side": "--resolution",
    "replace what a run wrote": "--overwrite",
    "seed": "--seed",
    "device": "--device",
}
"""Each concept and its one spelling."""
RETIRED = {"--out", "--output", "--iters", "--iterations", "--scale", "--downsample", "--downscale", "--dest"}
COMMANDS = {
    ("image", "fit"): {"output folder", "training length in passes over an image", "resolution as a multiple of the "
                       "data's", "replace what a run wrote", "seed", "device"},
    ("image", "render"): {"output file", "resolution as a multiple of the data's", "replace what a run wrote"},
    ("image", "bench"): {"output folder", "training length in passes over an image",
                         "resolution as a multiple of the data's", "seed", "device"},
    ("sdf", "fit"): {"output folder", "training length in optimizer steps", "grid points per side",
                     "replace what a run wrote", "seed", "device"},
    ("sdf", "mesh"): {"output file", "grid points per side", "replace what a run wrote"},
    ("sdf", "bench"): {"output folder", "training length in optimizer steps", "grid points per side", "seed", "device"},
    ("export_mesh", None): {"output file", "grid points per side", "replace what a run wrote"},
    ("demo", None): {"output folder", "training length in optimizer steps", "replace what a run wrote", "seed",
                     "device"},
    ("scene", "blender"): {"output folder", "seed"},
    ("scene", "capture"): {"output folder", "seed"},
    ("nerf_bench", None): {"output folder", "training length in optimizer steps", "resolution as a multiple of the "
                           "data's", "seed", "device"},
}  # fmt: skip
"""The concepts each command (module of rff_field.cli, subcommand) has."""
TYPES = {"image": "Command", "sdf": "Command", "scene": "Command", "export_mesh": "ExportMesh", "demo": "Demo",
         "nerf_bench": "NerfBench"}  # fmt: skip


def options(module: str, subcommand) -> set[str]:
    """The options a command's --help lists (the first word of each option row)."""
    command_type = getattr(importlib.import_module(f"rff_field.cli.{module}"), TYPES[module])
    help_text = io.StringIO()
    with contextlib.redirect_stdout(help_text), pytest.raises(SystemExit):
        tyro.cli(command_type, args=[*([subcommand] if subcommand else []), "--help"])
    return set(re.findall(r"(?:^|│) {1,4}(?:-\w, )?(--[a-z0-9][a-z0-9.-]*)", help_text.getvalue(), re.MULTILINE))


@pytest.mark.parametrize("command", sorted(COMMANDS, key=str), ids=lambda c: " ".join(filter(None, c)))
def test_every_command_spells_each_concept_the_one_way(command):
    found = options(*command)
    assert found, "no options parsed from --help"
    assert found & RETIRED == set()
    assert {WORDS[concept] for concept in COMMANDS[command]} <= found
