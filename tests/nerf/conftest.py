"""Fixtures shared by the NeRF tests."""

import pytest

from rff_field.nerf.synthetic_scene import CaptureSpec, write_nerfstudio_capture


@pytest.fixture(scope="session")
def capture(tmp_path_factory):
    """A small generated unbounded capture (nerfstudio-data): 10 views of 16x16 pixels."""
    return write_nerfstudio_capture(
        tmp_path_factory.mktemp("capture") / "capture", CaptureSpec(image_size=16, num_views=10, supersample=1)
    )
