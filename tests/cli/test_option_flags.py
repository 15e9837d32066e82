"""Messages name options by the flags users type: every option a command records maps to one of its flags."""

import dataclasses
import warnings

import pytest
import tyro

from rff_field.bench.image import BenchConfig
from rff_field.cli import bench, image, sdf
from rff_field.common.options import option_flag

SDF_HIDDEN = {"network.wire_bands", "network.sape_embedding", "network.sape_res", "network.sape_epsilon"}
"""Network options that the SDF commands do not offer (they keep their defaults)."""


def command_flags(command: type) -> set[str]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        parser = tyro.extras.get_parser(command)
    return {flag for action in parser._actions for flag in action.option_strings}


def leaf_keys(settings: dict, prefix: str = "") -> list[str]:
    keys = []
    for key, value in settings.items():
        keys += leaf_keys(value, f"{prefix}{key}.") if isinstance(value, dict) else [prefix + key]
    return keys


@pytest.mark.parametrize(
    "command, hidden",
    [
        (image.Fit(), set()),
        (image.Bench(config=BenchConfig()), set()),
        (sdf.Fit(), SDF_HIDDEN),
        (sdf.Bench(), SDF_HIDDEN | {"network.method"}),
        (bench.Nerf(), set()),
    ],
)
def test_every_recorded_option_maps_to_a_flag_of_its_command(command, hidden):
    flags = command_flags(type(command))
    keys = leaf_keys(dataclasses.asdict(command))
    assert len(keys) > 10
    assert {key for key in keys if option_flag(key) not in flags} == hidden


def test_option_flag_spells_flags_and_leaves_other_names():
    assert option_flag("fit.network.hidden_features") == "--hidden-features"
    assert option_flag("train.line_search.lr_max") == "--line-search.lr-max"
    assert option_flag("downsample") == "--downsample"
    assert option_flag("image content") == "image content"
