"""SDF training: every method learns, the loss and schedules are BACON's, the line search drives the filter."""

import math

import numpy as np
import pytest
import torch
from torch import nn
from torch.optim.optimizer import register_optimizer_step_pre_hook

from rff_field.core.optim import LineSearchConfig
from rff_field.sdf.data import MeshSDF, SamplePool, build_pool, is_closed, load_shape
from rff_field.sdf.fit import (
    SDF_METHODS,
    SDFNetworkConfig,
    SDFTrainConfig,
    build_sdf_network,
    extract_mesh,
    network_outputs,
    parameter_counts,
    sdf_loss,
    train_sdf,
)

TINY = dict(hidden_features=32, hidden_layers=2, pe_frequencies=6, rff_frequencies=18, bacon_max_frequency=48)


@pytest.fixture(scope="module")
def pool_arrays():
    _, mesh, _ = load_shape(None)  # the generated bumpy sphere
    return build_pool(MeshSDF(mesh, seed=0), 24_000, "generated", surface_samples=2000)


def held_out_loss(net, batch):
    with torch.no_grad():
        return float(sdf_loss(network_outputs(net, batch.points), batch.sdf, batch.num_coarse))


@pytest.mark.parametrize("method", SDF_METHODS)
def test_every_method_lowers_the_loss(method, pool_arrays):
    net = build_sdf_network(SDFNetworkConfig(method=method, **TINY), seed=0)
    held_out = SamplePool(pool_arrays, seed=99).sample(2000)
    before = held_out_loss(net, held_out)
    train = SDFTrainConfig(iters=40, points_per_step=600)
    result = train_sdf(net, SamplePool(pool_arrays, seed=0), method, train)
    assert result.iters == 40 and result.diverged_at is None
    assert held_out_loss(net, held_out) < 0.7 * before
    assert result.seconds > 0 and len(result.loss) == 40


def test_loss_is_fine_sum_plus_weighted_coarse_sum_averaged_over_outputs():
    target = torch.tensor([1.0, 2.0, 0.0, 0.0])
    a = torch.tensor([0.0, 0.0, 1.0, 2.0])  # errors 1, 2 on the two coarse, 1, 2 on the two fine samples
    b = torch.zeros(4)  # errors 1, 2 (coarse), 0, 0 (fine)
    loss = sdf_loss([a, b], target, num_coarse=2, coarse_weight=0.1)
    coarse = ((1 + 4) + (1 + 4)) / 2
    fine = ((1 + 4) + 0) / 2
    assert float(loss) == pytest.approx(fine + 0.1 * coarse)


def test_learning_rate_decays_log_linearly_to_lr_final(pool_arrays):
    net = build_sdf_network(SDFNetworkConfig(method="filtered-pe", **TINY))
    train = SDFTrainConfig(
        iters=20, points_per_step=200, lr=1e-2, lr_final=1e-4, line_search=LineSearchConfig(enabled=False)
    )
    seen = []
    rates = train_sdf(
        net, SamplePool(pool_arrays), "filtered-pe", train, on_step=lambda *args: seen.append(args)
    ).filter_lr
    expected = [1e-2 * (1e-2) ** (t / 20) for t in range(20)]  # the filter follows the schedule without LS
    np.testing.assert_allclose(rates, expected, rtol=1e-6)
    assert [(step, rate) for step, _, rate in seen] == [(19, rates[-1])]  # progress: every 50 steps and the last


def test_line_search_sets_the_filter_rate_within_bounds(pool_arrays):
    net = build_sdf_network(SDFNetworkConfig(method="filtered-rff", **TINY))
    train = SDFTrainConfig(iters=15, points_per_step=400, line_search=LineSearchConfig(lr_max=3e-3, lr_min=1e-6))
    result = train_sdf(net, SamplePool(pool_arrays), "filtered-rff", train)
    assert len(result.filter_lr) == 15
    assert all(1e-6 <= r <= 3e-3 for r in result.filter_lr)
    without = build_sdf_network(SDFNetworkConfig(method="mlp-pe", **TINY))
    assert train_sdf(without, SamplePool(pool_arrays), "mlp-pe", train).filter_lr == []


def test_filter_parameters_are_counted_apart():
    counts = parameter_counts(build_sdf_network(SDFNetworkConfig(method="filtered-pe", **TINY)))
    d = 3 * 2 * TINY["pe_frequencies"]
    assert counts["filter_parameters"] == 3 * d * d
    assert counts["parameters"] == counts["filter_parameters"] + counts["inr_parameters"]


def test_per_method_defaults_follow_bacon():
    assert SDFNetworkConfig(method="mlp-pe").resolved().hidden_layers == 7  # 8 ReLU layers
    assert SDFNetworkConfig(method="siren").resolved().hidden_layers == 8  # 9 sine layers
    assert SDFNetworkConfig(method="bacon", hidden_layers=3).resolved().hidden_layers == 3
    with pytest.raises(ValueError, match="WIRE PE"):
        build_sdf_network(SDFNetworkConfig(method="mlp-pe", pe="wire"))


def test_non_finite_loss_stops_training(pool_arrays):
    class Broken(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.ones(1))

        def forward(self, x):
            return x[..., :1] * self.w * math.nan

    result = train_sdf(Broken(), SamplePool(pool_arrays), "mlp-pe", SDFTrainConfig(iters=5, points_per_step=10))
    assert result.diverged_at == 0 and result.iters == 0 and result.loss == []


class BreaksAtStep(nn.Module):
    """A one-parameter network whose output turns NaN at step ``step`` (its forward pass number ``step + 1``)."""

    def __init__(self, step: int):
        super().__init__()
        self.w = nn.Parameter(torch.ones(1))
        self.step, self.calls = step, 0

    def forward(self, x):
        self.calls += 1
        return x[..., :1] * self.w * (math.nan if self.calls > self.step else 1.0)


def test_training_stops_at_the_first_check_after_the_loss_turns_non_finite_and_keeps_the_last_finite_state(
    pool_arrays,
):
    net = BreaksAtStep(3)  # losses are read every log_every = 4 steps: step 3 is seen at the first read
    config = SDFTrainConfig(iters=20, points_per_step=10, log_every=4, line_search=LineSearchConfig(enabled=False))
    result = train_sdf(net, SamplePool(pool_arrays), "mlp-pe", config)
    # no read before step 4 found everything finite: the network is put back to its initial state, of step 0
    assert (result.diverged_at, result.iters, len(result.loss), net.calls) == (3, 0, 0, 4)
    assert "diverged at step 3" in result.diverged and net.w.item() == 1.0
    # the timings divide by the 4 steps trained, not by the 0 kept
    assert result.steps_run == 4 and result.seconds_per_iter == pytest.approx(result.seconds / 4)


class SphereSDF(nn.Module):
    def __init__(self, radius):
        super().__init__()
        self.radius = radius

    def forward(self, x):
        return x.norm(dim=-1, keepdim=True) - self.radius


def test_marching_cubes_of_an_analytic_sphere_is_close_to_the_sphere():
    from rff_field.sdf.metrics import Surface, shape_metrics

    radius = 0.3
    vertices, triangles = extract_mesh(SphereSDF(radius), resolution=48)
    assert is_closed(triangles)
    # Outward orientation: positive enclosed volume close to the sphere's.
    v = vertices[triangles]
    volume = np.einsum("ij,ij->i", v[:, 0], np.cross(v[:, 1], v[:, 2])).sum() / 6
    assert volume == pytest.approx(4 / 3 * math.pi * radius**3, rel=0.01)
    # Distances from the mesh to the true sphere, and the Chamfer against a fine sphere mesh.
    assert np.abs(np.linalg.norm(vertices, axis=-1) - radius).max() < 1e-3
    from rff_field.sdf.data import sphere_mesh

    fine = sphere_mesh(radius, subdivisions=6)
    metrics = shape_metrics(Surface(vertices, triangles), Surface(fine.vertices, fine.triangles), num_samples=20_000)
    assert metrics["chamfer"] < 1e-6  # well below a voxel (1/47) squared
    assert metrics["normal_consistency"] > 0.999 and metrics["f_score"] == 1.0


def test_extract_mesh_of_a_field_without_a_surface_is_empty():
    vertices, triangles = extract_mesh(SphereSDF(-1.0), resolution=16)  # positive everywhere
    assert len(vertices) == 0 and len(triangles) == 0


def test_a_state_whose_first_loss_was_not_finite_is_not_kept(pool_arrays):
    net = BreaksAtStep(4)  # the read at step 4 finds steps 0-3 finite; the state it copied gives step 4's NaN
    config = SDFTrainConfig(iters=20, points_per_step=10, log_every=4, line_search=LineSearchConfig(enabled=False))
    result = train_sdf(net, SamplePool(pool_arrays), "mlp-pe", config)
    assert (result.diverged_at, result.iters, len(result.loss), net.calls) == (4, 0, 0, 8)
    assert net.w.item() == 1.0 and "diverged at step 4" in result.diverged


@pytest.mark.parametrize("amsgrad", [False, True])
def test_the_amsgrad_option_reaches_adam(amsgrad, pool_arrays, monkeypatch):
    made = []

    class RecordingAdam(torch.optim.Adam):
        def __init__(self, params, **kwargs):
            made.append(kwargs.get("amsgrad"))
            super().__init__(params, **kwargs)

    monkeypatch.setattr(torch.optim, "Adam", RecordingAdam)
    net = build_sdf_network(SDFNetworkConfig(method="filtered-pe", **TINY))
    train_sdf(net, SamplePool(pool_arrays), "filtered-pe", SDFTrainConfig(iters=2, points_per_step=50, amsgrad=amsgrad))
    assert made == [amsgrad]


@pytest.mark.parametrize("line_search", [True, False], ids=["line search", "fixed filter rate"])
def test_gradients_are_clipped_to_grad_clip(line_search, pool_arrays):
    norms = []  # the total gradient norm Adam steps with

    def record(optimizer, args, kwargs):
        grads = [p.grad for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
        norms.append(float(torch.linalg.vector_norm(torch.stack([grad.norm() for grad in grads]))))

    hook = register_optimizer_step_pre_hook(record)
    try:
        for clip in (0.0, 1e-4):
            net = build_sdf_network(SDFNetworkConfig(method="filtered-pe", **TINY), seed=0)
            config = SDFTrainConfig(iters=5, points_per_step=200, grad_clip=clip,
                                    line_search=LineSearchConfig(enabled=line_search))  # fmt: skip
            train_sdf(net, SamplePool(pool_arrays, seed=0), "filtered-pe", config)
    finally:
        hook.remove()
    unclipped, clipped = norms[:5], norms[5:]
    assert min(unclipped) > 1e-4 and all(norm <= 1e-4 * (1 + 1e-5) for norm in clipped)
