import math

import pytest
import torch

from rff_field.core.encodings import PositionalEncoding, RandomFourierEncoding


def test_loglinear_frequencies_match_definition():
    enc = PositionalEncoding(in_dim=2, num_frequencies=8, scale=32.0)
    expected = torch.tensor([32.0 ** (i / 8) for i in range(1, 9)])
    torch.testing.assert_close(enc.frequencies, expected)
    assert enc.frequencies[-1].item() == pytest.approx(32.0)
    assert enc.get_out_dim() == 2 * 2 * 8


def test_pe_features_are_sin_cos_of_each_axis_and_frequency():
    enc = PositionalEncoding(in_dim=2, num_frequencies=3, scale=4.0, include_input=True)
    x = torch.tensor([[0.1, -0.3]])
    out = enc(x)
    assert out.shape == (1, enc.get_out_dim()) == (1, 2 + 12)
    torch.testing.assert_close(out[0, :2], x[0])
    freqs = enc.frequencies
    phase = torch.stack([2 * math.pi * x[0, d] * freqs for d in range(2)]).flatten()
    torch.testing.assert_close(out[0, 2:8], torch.sin(phase))
    torch.testing.assert_close(out[0, 8:], torch.cos(phase))


def test_nerf_preset_uses_powers_of_two():
    enc = PositionalEncoding.pow2(in_dim=3, num_frequencies=10)
    torch.testing.assert_close(enc.frequencies, 2.0 ** torch.arange(10.0))
    assert enc.get_out_dim() == 3 + 3 * 2 * 10


def test_wire_preset_is_nyquist_limited():
    # WIRE repository: L = floor(log2(side / 4)) bands, sin(2**k pi x), input included.
    enc = PositionalEncoding.wire(in_dim=2, sidelength=128)
    assert enc.num_frequencies == 5 and enc.get_out_dim() == 22
    torch.testing.assert_close(enc.frequencies, 2.0 ** (torch.arange(5.0) - 1))
    x = torch.tensor([[0.37, 0.0]])
    assert enc(x)[0, 2 + 4].item() == pytest.approx(math.sin(2**4 * math.pi * 0.37), abs=1e-5)
    with pytest.raises(ValueError, match="too small"):
        PositionalEncoding.wire(in_dim=2, sidelength=4)


def test_rff_is_reproducible_from_its_seed():
    a = RandomFourierEncoding(in_dim=2, num_frequencies=16, sigma=10.0, seed=3)
    b = RandomFourierEncoding(in_dim=2, num_frequencies=16, sigma=10.0, seed=3)
    c = RandomFourierEncoding(in_dim=2, num_frequencies=16, sigma=10.0, seed=4)
    torch.testing.assert_close(a.B, b.B)
    assert not torch.allclose(a.B, c.B)
    assert "B" in a.state_dict()  # a checkpoint carries the frequencies
    x = torch.rand(5, 2)
    torch.testing.assert_close(
        a(x), torch.cat([torch.sin(2 * math.pi * x @ a.B.T), torch.cos(2 * math.pi * x @ a.B.T)], -1)
    )


def test_rff_frequencies_have_requested_spread():
    enc = RandomFourierEncoding(in_dim=2, num_frequencies=4096, sigma=5.0)
    assert enc.B.std().item() == pytest.approx(5.0, rel=0.05)
    assert enc.get_out_dim() == 8192


def test_global_rng_does_not_change_rff():
    torch.manual_seed(0)
    a = RandomFourierEncoding(in_dim=3, num_frequencies=8, sigma=1.0, seed=0)
    torch.manual_seed(123)
    b = RandomFourierEncoding(in_dim=3, num_frequencies=8, sigma=1.0, seed=0)
    torch.testing.assert_close(a.B, b.B)


def test_encodings_accept_covs_and_batch_dims():
    for enc in (PositionalEncoding(3, 4, 8.0), RandomFourierEncoding(3, 4, 2.0)):
        out = enc(torch.rand(2, 5, 3), covs=None)
        assert out.shape == (2, 5, enc.get_out_dim())


def test_rff_phases_stay_in_full_precision_under_autocast():
    encoding = RandomFourierEncoding(2, 64, 10.0)
    coords = torch.rand(500, 2) * 2 - 1
    expected = encoding(coords)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        features = encoding(coords)
    assert features.dtype == torch.float32 and torch.equal(features, expected)
    assert encoding.to("meta")(coords.to("meta")).shape == expected.shape  # a device without autocast


def test_wire_bands_round_down_where_the_side_is_not_a_power_of_two():
    assert PositionalEncoding.wire(2, 192).get_out_dim() == 22  # floor(log2(192 / 4)) = 5 bands, input included


def test_rff_with_its_input_prepends_the_coordinates():
    encoding = RandomFourierEncoding(2, 4, 1.0, include_input=True)
    x = torch.rand(5, 2)
    features = encoding(x)
    assert features.shape == (5, encoding.get_out_dim()) and torch.equal(features[:, :2], x)


def test_rff_of_float64_coordinates_is_computed_in_float64():
    encoding = RandomFourierEncoding(2, 4, 10.0)
    x = torch.rand(5, 2, dtype=torch.float64)
    phase = 2 * math.pi * x @ encoding.B.double().T
    features = encoding(x)
    assert features.dtype == torch.float64
    torch.testing.assert_close(features, torch.cat([phase.sin(), phase.cos()], -1), rtol=1e-12, atol=1e-12)
