"""The proposal networks' faster torch hash grid computes nerfstudio's encoding and its gradient."""

from __future__ import annotations

import pytest
import torch
from nerfstudio.data.scene_box import SceneBox
from nerfstudio.field_components.encodings import HashEncoding
from nerfstudio.fields.density_fields import HashMLPDensityField

from rff_field.nerf.hash_grid import TorchHashEncoding, use_faster_torch_hash_grid
from rff_field.nerf.nerfacto_model import RFFNerfactoModelConfig


def points() -> torch.Tensor:
    """Points inside the unit cube, on grid corners (ceil == floor) and outside it (negative coordinates)."""
    generator = torch.Generator().manual_seed(0)
    inside = torch.rand(4000, 3, generator=generator)
    on_corners = torch.randint(0, 17, (500, 3), generator=generator) / 16.0
    outside = torch.rand(500, 3, generator=generator) * 3.0 - 1.5
    return torch.cat([inside, on_corners, outside]).view(10, 500, 3)


@pytest.mark.parametrize("levels, log2_size, features", [(5, 15, 2), (3, 10, 4), (1, 4, 1)])
def test_equals_nerfstudios_torch_hash_grid_and_its_gradient(levels, log2_size, features):
    torch.manual_seed(0)
    reference = HashEncoding(levels, 16, 64 if levels > 1 else 16, log2_size, features, implementation="torch")
    with torch.no_grad():
        reference.hash_table.uniform_(-1.0, 1.0)  # features of order one, so that a wrong corner shows
    faster = TorchHashEncoding(levels, 16, 64 if levels > 1 else 16, log2_size, features, implementation="torch")
    faster.load_state_dict(reference.state_dict())
    x = points()
    weights = torch.randn(*x.shape[:-1], levels * features)
    outputs, gradients = [], []
    for encoding in (reference, faster):
        out = encoding(x)
        (out * weights).sum().backward()
        outputs.append(out.detach())
        gradients.append(encoding.hash_table.grad)
    assert outputs[1].shape == outputs[0].shape == (*x.shape[:-1], levels * features)
    # a sum of 8 terms in [-1, 1] with weights summing to 1, in another order: equal to rounding
    torch.testing.assert_close(outputs[1], outputs[0], rtol=0.0, atol=1e-5)
    assert gradients[0].abs().max() > 1.0  # the gradient reaches the table
    torch.testing.assert_close(gradients[1], gradients[0], rtol=1e-5, atol=1e-4)


def test_half_precision_positions_are_encoded_as_nerfstudio_does():
    """nerfstudio's grid scales fp16 positions by float32 resolutions (so in float32); so must this one."""
    reference = HashEncoding(5, 16, 64, 15, 2, implementation="torch")
    faster = TorchHashEncoding(5, 16, 64, 15, 2, implementation="torch")
    faster.load_state_dict(reference.state_dict())
    x = points().half()
    with torch.no_grad():
        expected, got = reference(x), faster(x)
    assert got.dtype == expected.dtype == torch.float32
    torch.testing.assert_close(got, expected, rtol=0.0, atol=1e-8)  # table entries are of order 1e-3


def test_rff_nerfacto_proposal_networks_use_it_with_nerfstudios_parameters():
    box = SceneBox(aabb=torch.tensor([[-1.0] * 3, [1.0] * 3]))
    torch.manual_seed(0)
    model = RFFNerfactoModelConfig(implementation="torch", compute_lpips=False).setup(scene_box=box, num_train_data=3)
    torch.manual_seed(0)
    plain = HashMLPDensityField(box.aabb, **model.config.proposal_net_args_list[0], implementation="torch")
    network = model.proposal_networks[0]
    assert type(network.encoding) is TorchHashEncoding and network.mlp_base[0] is network.encoding
    assert {k: v.shape for k, v in network.state_dict().items()} == {k: v.shape for k, v in plain.state_dict().items()}
    plain.load_state_dict(network.state_dict())
    positions = torch.rand(256, 3) * 2 - 1
    with torch.no_grad():
        plain.spatial_distortion = network.spatial_distortion
        torch.testing.assert_close(network.density_fn(positions), plain.density_fn(positions), rtol=1e-5, atol=0.0)


def test_leaves_tinycudanns_hash_grid_alone():
    box = SceneBox(aabb=torch.tensor([[-1.0] * 3, [1.0] * 3]))
    network = HashMLPDensityField(box.aabb, num_levels=2, max_res=32, log2_hashmap_size=8, implementation="torch")
    network.encoding.tcnn_encoding = torch.nn.Identity()  # stands in for tinycudann's encoding (no CUDA here)
    use_faster_torch_hash_grid(network)
    assert type(network.encoding) is HashEncoding
