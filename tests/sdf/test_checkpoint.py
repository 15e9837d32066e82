"""An SDF fit stopped at its time budget and resumed from its checkpoint takes the very steps of an uninterrupted fit.

Both runs execute the same operations on the same values in one process, so their losses, rates and weights are
equal to the last bit on any CPU; a checkpoint that missed any part of the state (Adam's moments and AMSGrad's
maxima, the sampler's position, the schedule, the filter's rate) would change them.
"""

from __future__ import annotations

import json
import signal
import time
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch import nn

from rff_field.bench import sdf as sdf_bench
from rff_field.cli import sdf as cli
from rff_field.common.checkpoint import CHECKPOINT_FILE, check_resumable, checkpoint_iteration
from rff_field.common.stopping import FitInterrupted
from rff_field.core.errors import UsageError
from rff_field.core.optim import LineSearchConfig
from rff_field.sdf import fit as sdf_fit
from rff_field.sdf import run as sdf_run
from rff_field.sdf.checkpoint import SDFCheckpoint, sdf_settings
from rff_field.sdf.data import MeshSDF, SamplePool, build_pool, load_shape
from rff_field.sdf.fit import SDFNetworkConfig, SDFTrainConfig, build_sdf_network, train_sdf
from rff_field.sdf.run import GroundTruth, OutputConfig, run_sdf
from tests.interrupts import press_ctrl_c_on_call
from tests.sdf.test_cli import TINY, run_cli

# TINY's options; the command line reads --bacon-max-frequency 32 as 32.0, and a checkpoint of either resumes
NETWORK = dict(hidden_features=32, hidden_layers=2, pe_frequencies=6, rff_frequencies=18, bacon_max_frequency=32)
TRAIN = dict(iters=15, points_per_step=400, log_every=5)
CASES = {
    "filtered-pe, line search": ("filtered-pe", dict(line_search=LineSearchConfig(lr_max=1e-2))),
    "filtered-pe, scheduled filter rate": ("filtered-pe", dict(line_search=LineSearchConfig(enabled=False))),
    "bacon, several outputs": ("bacon", {}),
}


@pytest.fixture(scope="module")
def shape():
    return load_shape(None)[1]  # the generated bumpy sphere


@pytest.fixture(scope="module")
def pool_arrays(shape):
    return build_pool(MeshSDF(shape, seed=0), 8000, "generated", surface_samples=2000)


def fit(method, train, sampler, **kwargs):
    network_config = SDFNetworkConfig(method=method, **NETWORK)
    network = build_sdf_network(network_config, seed=0)
    settings = sdf_settings(network_config, train, "generated", sampler)
    return network, train_sdf(network, sampler, method, train, settings=settings, notify=lambda m: None, **kwargs)


@pytest.mark.parametrize("fresh", [False, True], ids=["pool", "fresh samples"])
def test_a_stopped_sdf_fit_resumes_where_it_stopped(tmp_path, pool_arrays, shape, fresh):
    def sampler():
        return MeshSDF(shape, seed=0) if fresh else SamplePool(pool_arrays, seed=0)

    for name, (method, options) in CASES.items():
        train = SDFTrainConfig(**TRAIN, **options)
        path = tmp_path / name / CHECKPOINT_FILE
        _, stopped = fit(method, train, sampler(), checkpoint=path, stop_at=0.0)  # stops after step 5
        assert stopped.iters == 5 and stopped.stopped and path.is_file(), name
        _, again = fit(method, train, sampler(), checkpoint=path, stop_at=0.0)  # 5 more, then stops
        assert again.iters == 10 and again.resumed_at == [5], name
        shown = []  # what the progress bar is told: it starts where the fit stood
        network, resumed = fit(method, train, sampler(), checkpoint=path, on_step=lambda *values: shown.append(values))  # noqa: B023
        assert resumed.iters == 15 and resumed.resumed_at == [5, 10] and resumed.stopped is None, name
        assert shown[0] == (9, again.loss[-1], (again.filter_lr or [None])[-1]), name
        reference, uninterrupted = fit(method, train, sampler())
        assert resumed.loss == uninterrupted.loss, name
        assert resumed.filter_lr == uninterrupted.filter_lr, name
        for key, value in reference.state_dict().items():
            assert torch.equal(network.state_dict()[key], value), (name, key)


def test_the_timings_of_a_resumed_fit_count_every_run(tmp_path, pool_arrays, monkeypatch):
    clock = [0.0]  # one second (wall, CPU and sampling) a step: the time the sampler takes

    class OneSecondPool(SamplePool):
        def sample(self, n):
            clock[0] += 1.0
            return super().sample(n)

    monkeypatch.setattr(sdf_fit, "time", SimpleNamespace(perf_counter=lambda: clock[0], process_time=lambda: clock[0]))
    train, path = SDFTrainConfig(**TRAIN), tmp_path / CHECKPOINT_FILE
    for stop_at in (0.0, 0.0, None):  # 5 steps each
        _, result = fit("mlp-pe", train, OneSecondPool(pool_arrays, seed=0), checkpoint=path, stop_at=stop_at)
    assert result.resumed_at == [5, 10] and result.steps_run == 15
    assert (result.seconds, result.cpu_seconds, result.sampling_seconds) == (15.0, 15.0, 15.0)


def test_a_resumed_fit_measures_a_blown_up_loss_against_the_first_runs_first_loss(tmp_path, pool_arrays):
    class BlowsUpAtStep5(nn.Module):  # predicts 0, then 1e3 everywhere: a loss ~1e6 times the first
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.zeros(1))
            self.calls = 0

        def forward(self, x):
            self.calls += 1
            return x[..., :1] * 0 * self.w + (1e3 if self.calls > 5 else 0.0)

    train = SDFTrainConfig(**TRAIN, line_search=LineSearchConfig(enabled=False))
    whole = train_sdf(BlowsUpAtStep5(), SamplePool(pool_arrays, seed=0), "mlp-pe", train)
    path, net = tmp_path / CHECKPOINT_FILE, BlowsUpAtStep5()
    stopped = train_sdf(net, SamplePool(pool_arrays, seed=0), "mlp-pe", train, checkpoint=path, stop_at=0.0)
    assert stopped.stopped and stopped.iters == 5
    resumed = train_sdf(net, SamplePool(pool_arrays, seed=0), "mlp-pe", train, checkpoint=path, notify=lambda m: None)
    assert whole.diverged_at == resumed.diverged_at == 5 and "times its first value" in resumed.diverged


def test_a_checkpoint_of_other_settings_is_not_resumed(tmp_path, pool_arrays):
    path = tmp_path / CHECKPOINT_FILE
    fit("mlp-pe", SDFTrainConfig(**TRAIN), SamplePool(pool_arrays, seed=0), checkpoint=path, stop_at=0.0)
    notices = []
    network_config = SDFNetworkConfig(method="mlp-pe", **NETWORK)
    longer = SDFTrainConfig(**TRAIN | dict(iters=16))
    sampler = SamplePool(pool_arrays, seed=0)
    settings = sdf_settings(network_config, longer, "generated", sampler)
    result = train_sdf(build_sdf_network(network_config), sampler, "mlp-pe", longer, checkpoint=path,
                       settings=settings, notify=notices.append)  # fmt: skip
    assert result.iters == 16 and result.resumed_at == []
    assert notices == [f"{path} was written by a fit with other settings; this fit starts from the first step"]


def test_a_checkpoint_of_another_pool_of_the_same_name_and_size_is_refused(tmp_path, pool_arrays):
    path = tmp_path / CHECKPOINT_FILE
    fit("mlp-pe", SDFTrainConfig(**TRAIN), SamplePool(pool_arrays, seed=0), checkpoint=path, stop_at=0.0)
    moved = dict(pool_arrays, coarse_points=pool_arrays["coarse_points"] + 0.01)
    settings = sdf_settings(SDFNetworkConfig(method="mlp-pe", **NETWORK), SDFTrainConfig(**TRAIN), "generated",
                            SamplePool(moved, seed=0))  # fmt: skip
    with pytest.raises(UsageError, match=r"other settings \(shape content differs\)"):
        check_resumable(path, SDFCheckpoint, settings, overwrite=False, unit="step")


def test_rff_sdf_fit_resumes_a_killed_run_and_removes_its_checkpoint(tmp_path, capsys):
    out = tmp_path / "fit"
    args = ["fit", "--out", str(out), "--method", "filtered-pe", "--iters", "10", "--log-every", "4", *TINY]
    # what a run killed after its first checkpoint leaves behind: only the checkpoint
    network_config = SDFNetworkConfig(method="filtered-pe", **NETWORK)
    train = SDFTrainConfig(iters=10, points_per_step=400, log_every=4)
    sampler = MeshSDF(load_shape(None)[1], seed=0)
    train_sdf(build_sdf_network(network_config), sampler, "filtered-pe", train, checkpoint=out / CHECKPOINT_FILE,
              settings=sdf_settings(network_config, train, "generated", sampler), stop_at=0.0)  # fmt: skip
    assert sorted(path.name for path in out.iterdir()) == [CHECKPOINT_FILE]
    record = cli.main(args)
    assert record["resumed_at"] == [4] and record["iters"] == 10
    assert "resuming at step 4 of 10 from" in capsys.readouterr().out
    assert (out / "metrics.json").is_file() and not (out / CHECKPOINT_FILE).exists()


def test_the_bench_lists_stops_and_resumes_a_job(tmp_path, capsys, pool_arrays):
    out = tmp_path / "bench"
    args = ["bench", "--out", str(out), "--iters", "10", "--log-every", "4", "--methods", "mlp-pe", "filtered-pe",
            "bacon,iters=12", *TINY]  # fmt: skip
    cli.main([*args, "--list-jobs"])  # lists the jobs and runs none
    assert capsys.readouterr().out.splitlines() == ["0\tpending\t10\truns/generated/mlp-pe",
                                                    "1\tpending\t10\truns/generated/filtered-pe",
                                                    "2\tpending\t12\truns/generated/bacon_iters_12"]  # fmt: skip
    assert not out.exists()
    # a job stopped by the budget, as the bench's run would leave it
    pool = out / "pools" / "generated.npz"
    pool.parent.mkdir(parents=True)
    arrays = build_pool(MeshSDF(load_shape(None)[1], seed=0), 4000, "generated", surface_samples=2000)
    np.savez(pool, **arrays)
    jobs = sdf_bench.sdf_jobs([("generated", pool)], [sdf_bench.parse_method("filtered-pe")])
    (out / jobs[0].folder).mkdir(parents=True)
    network, train = SDFNetworkConfig(**NETWORK), SDFTrainConfig(iters=10, points_per_step=400, log_every=4)
    record = run_sdf(out / jobs[0].folder, GroundTruth.from_arrays(arrays, "generated"), SamplePool(arrays), network,
                     train, OutputConfig(), progress=False, stop_at=0.0)  # fmt: skip
    assert record == {"stopped": "time budget reached after 4 of 10 steps", "iters": 4, "label": "filtered-pe"}
    assert not (out / jobs[0].folder / "metrics.json").exists()
    capsys.readouterr()
    cli.main([*args, "--list-jobs"])
    assert capsys.readouterr().out.splitlines()[1] == "1\tcheckpoint at 4\t10\truns/generated/filtered-pe"
    cli.main([*args, "--resume", "--budget-s", "1e-9"])  # past its budget before the first job starts
    assert "has finished yet, so there is no report to write" in capsys.readouterr().out
    assert not (out / "results.md").exists()
    cli.main([*args, "--resume"])
    record = json.loads((out / jobs[0].folder / "metrics.json").read_text())
    assert record["resumed_at"] == [4] and record["iters"] == 10
    assert not (out / jobs[0].folder / CHECKPOINT_FILE).exists()
    assert json.loads((out / "runs/generated/mlp-pe/metrics.json").read_text())["resumed_at"] is None


def test_the_bench_budget_counts_sampling_the_pools(tmp_path, capsys, monkeypatch):
    write_pool = sdf_bench.write_pool

    def slow_write_pool(*args, **kwargs):
        write_pool(*args, **kwargs)
        time.sleep(0.2)  # longer than the budget

    monkeypatch.setattr(sdf_bench, "write_pool", slow_write_pool)
    out = tmp_path / "bench"
    cli.main(["bench", "--out", str(out), "--iters", "10", "--methods", "mlp-pe", "--budget-s", "0.1", *TINY])
    assert "time budget of 0.1 s reached" in capsys.readouterr().out
    assert (out / "pools" / "generated.npz").is_file() and not (out / "runs").exists()


class CtrlCPool(SamplePool):
    """A pool whose ``sample`` presses Ctrl-C (SIGINT) ``presses`` times during the ``at``-th step."""

    def __init__(self, arrays, at: int, presses: int = 1) -> None:
        super().__init__(arrays, seed=0)
        self.at, self.presses, self.calls = at, presses, 0

    def sample(self, n):
        self.calls += 1
        if self.calls == self.at:
            for _ in range(self.presses):
                signal.raise_signal(signal.SIGINT)
        return super().sample(n)


def test_ctrl_c_ends_the_step_saves_a_checkpoint_and_the_fit_resumes(tmp_path, pool_arrays):
    path = tmp_path / CHECKPOINT_FILE
    handler = signal.getsignal(signal.SIGINT)
    with pytest.raises(FitInterrupted, match=f"interrupted after step 7 of 15; its checkpoint is in {path}"):
        fit("filtered-pe", SDFTrainConfig(**TRAIN), CtrlCPool(pool_arrays, at=7), checkpoint=path)
    assert signal.getsignal(signal.SIGINT) is handler
    network, resumed = fit("filtered-pe", SDFTrainConfig(**TRAIN), SamplePool(pool_arrays, seed=0), checkpoint=path)
    reference, uninterrupted = fit("filtered-pe", SDFTrainConfig(**TRAIN), SamplePool(pool_arrays, seed=0))
    assert resumed.resumed_at == [7] and resumed.loss == uninterrupted.loss
    assert resumed.filter_lr == uninterrupted.filter_lr
    for key, value in reference.state_dict().items():
        assert torch.equal(network.state_dict()[key], value), key
    assert checkpoint_iteration(path, SDFCheckpoint) == 15  # kept for the mesh and metrics, which take minutes
    # a second Ctrl-C does not wait for the end of the step
    with pytest.raises(KeyboardInterrupt) as interrupted:
        fit(
            "filtered-pe",
            SDFTrainConfig(**TRAIN),
            CtrlCPool(pool_arrays, at=3, presses=2),
            checkpoint=tmp_path / "2.pt",
        )
    assert type(interrupted.value) is KeyboardInterrupt and signal.getsignal(signal.SIGINT) is handler


def test_rff_sdf_fit_interrupted_by_ctrl_c_says_how_to_go_on(tmp_path, monkeypatch, capsys):
    out = tmp_path / "fit"
    args = ["fit", "--out", out, "--method", "mlp-pe", "--iters", "10", "--no-progress", *TINY]
    press_ctrl_c_on_call(monkeypatch, MeshSDF, "sample", at=4)  # during step 4
    code, _, err = run_cli(monkeypatch, capsys, *args)
    assert code == 130
    assert err.strip() == (f"rff-sdf: interrupted after step 4 of 10; its checkpoint is in {out / CHECKPOINT_FILE}, "
                           "and the same command goes on from there")  # fmt: skip
    monkeypatch.undo()
    code, stdout, _ = run_cli(monkeypatch, capsys, *args)
    assert code == 0 and "resuming at step 4 of 10" in stdout
    assert json.loads((out / "metrics.json").read_text())["resumed_at"] == [4]


def test_a_fit_interrupted_while_meshing_goes_on_without_training_again(tmp_path, monkeypatch, capsys):
    out = tmp_path / "fit"
    args = ["fit", "--out", out, "--method", "filtered-pe", "--iters", "10", "--no-progress", *TINY]
    press_ctrl_c_on_call(monkeypatch, sdf_fit, "sample_grid", at=1)
    code, _, err = run_cli(monkeypatch, capsys, *args)
    assert code == 130
    where = "rff-sdf: interrupted after training (10 steps), while meshing, measuring or writing"
    assert (
        err.strip() == f"{where}; its checkpoint is in {out / CHECKPOINT_FILE}, and the same command goes on from there"
    )
    monkeypatch.undo()
    steps = []
    monkeypatch.setattr(MeshSDF, "sample", lambda *a, **k: steps.append(1))  # a step taken would fail here
    code, stdout, _ = run_cli(monkeypatch, capsys, *args)
    assert code == 0 and "resuming at step 10 of 10" in stdout and steps == []
    assert json.loads((out / "metrics.json").read_text())["iters"] == 10 and not (out / CHECKPOINT_FILE).exists()


def test_rff_sdf_bench_interrupted_by_ctrl_c_says_to_go_on_with_resume(tmp_path, monkeypatch, capsys):
    out = tmp_path / "bench"
    args = ["bench", "--out", out, "--methods", "mlp-pe", "--iters", "10", "--log-every", "4", *TINY]
    press_ctrl_c_on_call(monkeypatch, SamplePool, "sample", at=4)  # during step 4
    code, _, err = run_cli(monkeypatch, capsys, *args)
    checkpoint = out / "runs" / "generated" / "mlp-pe" / CHECKPOINT_FILE
    assert code == 130
    assert err.strip() == (f"rff-sdf: interrupted after step 4 of 10; its checkpoint is in {checkpoint}, "
                           "and the same command with --resume goes on from there")  # fmt: skip
    monkeypatch.undo()
    code, _, _ = run_cli(monkeypatch, capsys, *args, "--resume")
    assert code == 0
    assert json.loads((checkpoint.parent / "metrics.json").read_text())["resumed_at"] == [4]


def test_a_fit_interrupted_while_writing_goes_on_without_overwrite(tmp_path, monkeypatch, capsys):
    out = tmp_path / "fit"
    args = ["fit", "--out", out, "--method", "mlp-pe", "--iters", "10", "--no-progress", *TINY]
    press_ctrl_c_on_call(monkeypatch, sdf_run, "write_json", at=1)  # the mesh and the history are written by then
    code, _, err = run_cli(monkeypatch, capsys, *args)
    assert code == 130 and "while meshing, measuring or writing" in err
    assert (out / "history.npz").is_file() and not (out / "metrics.json").exists()
    monkeypatch.undo()
    code, stdout, _ = run_cli(monkeypatch, capsys, *args)
    assert code == 0 and "resuming at step 10 of 10" in stdout
    assert (out / "metrics.json").is_file() and not (out / CHECKPOINT_FILE).exists()


def test_rff_sdf_fit_refuses_to_discard_a_checkpoint_of_other_settings(tmp_path, monkeypatch, capsys):
    out = tmp_path / "fit"
    args = ["fit", "--out", out, "--method", "mlp-pe", "--no-progress", *TINY]
    press_ctrl_c_on_call(monkeypatch, MeshSDF, "sample", at=4)
    assert run_cli(monkeypatch, capsys, *args, "--iters", "10")[0] == 130
    monkeypatch.undo()
    code, _, err = run_cli(monkeypatch, capsys, *args, "--iters", "12")
    assert code == 2
    assert "a fit with other settings (--iters: 10 there, 12 now); rerun with those to go on from step 4" in err
    assert checkpoint_iteration(out / CHECKPOINT_FILE, SDFCheckpoint) == 4  # kept
    code, stdout, _ = run_cli(monkeypatch, capsys, *args, "--iters", "12", "--overwrite")
    assert code == 0 and "resuming" not in stdout
    assert json.loads((out / "metrics.json").read_text())["resumed_at"] is None
