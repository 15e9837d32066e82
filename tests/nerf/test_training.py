"""The shared small rff-nerf-lite run, end to end: trained with the line search setting the filter's rate every step,
checkpointed and logged, loaded and evaluated on its test views without the viewer, and meshed by rff-export-mesh."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
import trimesh
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from rff_field.cli import export_mesh
from rff_field.common.mesh import sample_grid
from rff_field.nerf.evaluate import evaluate_views
from rff_field.nerf.loading import load_pipeline
from tests import exit_status
from tests.nerf.conftest import LOG_EVERY, STEPS


def test_the_line_search_set_the_filter_rate_at_every_step_and_the_run_kept_and_logged_it(trained):
    records = trained["line_search"]().records
    assert len(records) == STEPS == len(trained["rates"])
    assert torch.allclose(torch.tensor(trained["rates"], dtype=torch.float64), records[:, 3].double().cpu())
    run = trained["config_path"].parent
    checkpoint = torch.load(next((run / "nerfstudio_models").glob("step-*.ckpt")), weights_only=True)
    assert float(checkpoint["pipeline"]["_model.filter_lr"]) == pytest.approx(trained["rates"][-1], rel=1e-6)
    events = EventAccumulator(str(run)).Reload()
    logged = [event.step for event in events.Scalars("learning_rate/filter")]
    assert logged and all(step % LOG_EVERY == 0 for step in logged)


@pytest.mark.numerics
def test_the_filter_rate_follows_the_rule_step_by_step_rather_than_staying_constant(trained):
    assert len(set(trained["rates"])) > 1


def test_a_loaded_run_renders_and_scores_its_test_views_without_the_viewer(trained, tmp_path):
    config, pipeline, step = load_pipeline(trained["config_path"], test_mode="test")
    assert step == STEPS - 1 and not pipeline.model.training
    shown = float(pipeline.model.viewer_filter_lr.value)  # the viewer's readout, at the rate's own magnitude
    assert shown == pytest.approx(trained["rates"][-1], rel=1e-2)  # the last rate may be 0: the rule's lr_min
    pipeline.model.filter_lr.fill_(3.21e-9)
    pipeline.model.show_filter_lr()
    assert float(pipeline.model.viewer_filter_lr.value) == pytest.approx(3.21e-9, rel=1e-2)
    result = evaluate_views(pipeline, tmp_path)
    assert result["num_views"] == 2 and np.isfinite(result["mean"]["psnr"])
    for view in result["views"]:
        for kind in ("gt", "rgb", "depth"):
            assert (tmp_path / "renders" / f"{view['view']}_{kind}.png").is_file()
    assert (tmp_path / "metrics.json").is_file()


def test_loading_a_run_warns_of_no_image_loader_workers(trained):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        load_pipeline(trained["config_path"], test_mode="test")
    assert not [warning for warning in caught if "worker" in str(warning.message)]


def crossing(field, low, high) -> float:
    """A density level the field crosses in the box, by construction (its 90% quantile there)."""
    return float(np.quantile(sample_grid(lambda x: field.density_fn(x)[..., 0], low, high, 24), 0.9))


def test_export_mesh_meshes_the_region_the_cameras_look_at_and_prints_the_density_range(trained, tmp_path, capsys):
    _, pipeline, _ = load_pipeline(trained["config_path"])
    box = pipeline.model.scene_box.aabb.numpy()  # cameras at distance 4 around the origin: half of it, cut to this
    inner = ["--bbox-min", "-0.5", "-0.5", "-0.5", "--bbox-max", "0.5", "0.5", "0.5"]
    for low, high, extra in ((box[0], box[1], []), ([-0.5] * 3, [0.5] * 3, inner)):
        threshold = crossing(pipeline.model.field_fine, low, high)
        out = tmp_path / f"mesh{len(extra)}.ply"
        export_mesh.entrypoint(["--load-config", str(trained["config_path"]), "--output-path", str(out),
                                "--resolution", "24", "--threshold", str(threshold), "--min-component", "0",
                                *extra])  # fmt: skip
        printed = capsys.readouterr().out
        assert "density in the box:" in printed and f"--threshold {threshold:g}" in printed
        mesh = trimesh.load(out, process=False)
        assert len(mesh.faces) > 0 and mesh.visual.vertex_colors.shape == (len(mesh.vertices), 4)
        assert (mesh.vertices >= np.asarray(low) - 1e-5).all() and (mesh.vertices <= np.asarray(high) + 1e-5).all()


def test_export_mesh_writes_beside_the_run_unless_given_a_path(trained, tmp_path, monkeypatch, capsys):
    _, pipeline, _ = load_pipeline(trained["config_path"])
    box = pipeline.model.scene_box.aabb.numpy()
    threshold = crossing(pipeline.model.field_fine, box[0], box[1])
    monkeypatch.chdir(tmp_path)
    args = ["--load-config", str(trained["config_path"]), "--resolution", "16", "--threshold", str(threshold)]
    assert exit_status(export_mesh.entrypoint, args) == 0
    beside = trained["config_path"].parent / "mesh.ply"
    assert beside.is_file() and list(tmp_path.iterdir()) == []
    beside.unlink()


def test_the_proposal_grids_faster_torch_path_computes_nerfstudios_encoding():
    from nerfstudio.field_components.encodings import HashEncoding

    from rff_field.nerf.hash_grid import ProposalDensityField, TorchHashEncoding

    torch.manual_seed(0)
    field = ProposalDensityField(torch.tensor([[-1.0] * 3, [1.0] * 3]), num_levels=5, max_res=64,
                                 log2_hashmap_size=12, implementation="torch")  # fmt: skip
    assert type(field.encoding) is TorchHashEncoding and field.mlp_base[0] is field.encoding
    theirs = HashEncoding(num_levels=5, max_res=64, log2_hashmap_size=12, implementation="torch")
    theirs.load_state_dict(field.encoding.state_dict())
    points = torch.rand(1000, 3)
    assert torch.allclose(field.encoding(points), theirs(points), atol=1e-6)


def test_the_proposal_loss_trains_the_proposal_grids_and_leaves_the_positions_hence_the_poses_alone():
    from rff_field.nerf.hash_grid import ProposalDensityField

    field = ProposalDensityField(torch.tensor([[-1.0] * 3, [1.0] * 3]), num_levels=2, max_res=16,
                                 log2_hashmap_size=8, implementation="torch")  # fmt: skip
    positions = torch.rand(100, 3, requires_grad=True)
    density = field.density_fn(positions).sum()
    by_position, by_table = torch.autograd.grad(density, [positions, field.encoding.hash_table], allow_unused=True)
    assert by_position is None and by_table.abs().sum() > 0
