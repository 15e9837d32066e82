"""A run's config.yml is read by a loader that builds nerfstudio's and this package's configs and nothing else: a
crafted file runs no code, in rff-export-mesh or any other loader of ours."""

from __future__ import annotations

import yaml

from rff_field.cli import export_mesh
from tests import exit_status


def payload(marker) -> str:
    return f'!!python/object/apply:os.system ["touch {marker}"]'


def test_the_payload_runs_under_yaml_loader_as_nerfstudio_reads_it(tmp_path):
    yaml.load(payload(tmp_path / "ran"), Loader=yaml.UnsafeLoader)  # the premise of the tests below
    assert (tmp_path / "ran").exists()


def test_a_crafted_config_runs_no_code_and_is_refused_in_one_line(trained, tmp_path, capsys):
    text = trained["config_path"].read_text()
    crafted = {
        "alone": payload(tmp_path / "alone"),
        "inside": text.replace("experiment_name: tiny", f"experiment_name: {payload(tmp_path / 'inside')}"),
        "as-target": text.replace(
            "_target: !!python/name:rff_field.nerf.pipeline.RFFPipeline ''", "_target: !!python/name:os.system ''"
        ),  # fmt: skip
    }
    assert all(text != crafted[name] for name in ("inside", "as-target"))
    for name, content in crafted.items():
        path = trained["config_path"].parent / f"crafted-{name}.yml"  # beside the run's checkpoints
        path.write_text(content)
        code = exit_status(export_mesh.entrypoint, ["--load-config", path, "--output-path", tmp_path / f"{name}.ply"])
        error = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(error) == 1 and "--load-config" in error[0] and "os.system" in error[0]
        assert not (tmp_path / name).exists() and not (tmp_path / f"{name}.ply").exists()


def test_a_grid_larger_than_memory_is_refused_before_the_run_is_loaded(trained, tmp_path, capsys):
    args = ["--load-config", trained["config_path"], "--resolution", 3000, "--output-path", tmp_path / "m.ply"]
    assert exit_status(export_mesh.entrypoint, args) == 2
    assert "--resolution 3000" in capsys.readouterr().err and not (tmp_path / "m.ply").exists()
