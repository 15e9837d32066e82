"""SDF regression with BACON's protocol: the networks, the loss, the training loop and mesh extraction.

Defaults follow the BACON repository's SDF experiments (``experiments/train_sdf.py`` and its configs), which the
paper reuses: 10,000 samples a step (half coarse, half fine), loss ``sum fine^2 + 1e-2 sum coarse^2`` (averaged
over BACON's outputs when it has several), Adam with AMSGrad, gradient norm clipped to 1, and a learning rate that
decays log-linearly from the method's initial rate to 1e-4 over the run. Networks: ReLU MLPs of 8 layers of 256
(the size of BACON's ``ff`` baseline, with PyTorch's default initialisation), SIREN with 9 sine layers of 256,
BACON with 8 hidden layers of 256 and outputs after layers 2, 4, 6, 8. The filtered methods feed the same MLP
``f_a(gamma(v)) * gamma(v)``; the filter's rate is set by the line search every step while the MLP keeps the
schedule.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Callable, Literal, Optional, Union

import numpy as np
import torch
from jaxtyping import Float
from torch import Tensor, nn

from rff_field.common.checkpoint import (
    adam_state,
    load_checkpoint,
    model_state,
    restore_model,
    save_checkpoint,
    set_schedule,
)
from rff_field.common.mesh import marching_cubes, orient_outward, sample_grid
from rff_field.common.options import Hidden
from rff_field.common.progress import print_note
from rff_field.common.stopping import fit_stops
from rff_field.common.torch_state import seeded
from rff_field.core.divergence import LastFiniteState, divergence_hints
from rff_field.core.errors import TrainingDiverged, UsageError, check_fields
from rff_field.core.filter import split_filter_parameters
from rff_field.core.optim import FILTER_GROUP, LineSearchConfig, attach_line_search, named_param_groups, param_group
from rff_field.inr.bacon import Bacon, BaconSchedule, default_schedule
from rff_field.inr.config import NetworkConfig, build_network, count_parameters
from rff_field.sdf.checkpoint import SDFCheckpoint
from rff_field.sdf.data import MeshSDF, SamplePool

SDFMethod = Literal["mlp-pe", "mlp-rff", "siren", "gauss", "wire", "bacon", "filtered-pe", "filtered-rff"]
SDF_METHODS: tuple[str, ...] = (
    "mlp-pe",
    "mlp-rff",
    "siren",
    "gauss",
    "wire",
    "bacon",
    "filtered-pe",
    "filtered-rff",
)

# Per-method defaults: the BACON repository's SDF configs (ff = ReLU MLP, siren, bacon) and, for WIRE and GAUSS,
# the WIRE repository's occupancy script. ``hidden_layers`` counts layers after the first (WIRE convention).
DEFAULT_HIDDEN_LAYERS = {"siren": 8, "bacon": 8}  # others: 7, i.e. 8 nonlinear layers
DEFAULT_LR = {"siren": 1e-4, "bacon": 1e-2, "wire": 5e-3, "gauss": 5e-3}  # others: 1e-3


@dataclass
class SDFNetworkConfig(NetworkConfig):
    """The network of an SDF fit; fields left at ``None`` take the method's default from the BACON setup."""

    method: SDFMethod = "filtered-pe"
    """Network: ReLU MLP on PE or RFF (``mlp-*``), the same with the bias-free adaptive filter (``filtered-*``),
    or a baseline (``siren``, ``gauss``, ``wire``, ``bacon``)."""
    hidden_layers: Optional[int] = None  # type: ignore[assignment]
    """Hidden layers after the first (default: 7, i.e. 8 layers as BACON's ReLU MLP; 8 for SIREN and BACON)."""
    pe: Literal["wire", "loglinear", "pow2", "nerf"] = "loglinear"
    """PE bands: the paper's log-linear ``scale**(i/N)`` (default), ``2**k`` cycles (``pow2``; ``nerf`` is its
    earlier name), or WIRE's Nyquist-limited bands (which need a signal size, so not for shapes)."""
    pe_frequencies: int = 32
    """Frequencies per input dimension of the PE (the embedding has 3 x 2 x this many channels)."""
    pe_scale: float = 32.0
    """Highest PE frequency, in cycles per unit (the shape spans 0.9 units)."""
    rff_frequencies: int = 128
    """Number of random frequencies (as BACON's ``ff``: 256 channels)."""
    rff_sigma: float = 8.0
    """Standard deviation of the random frequencies, in cycles per unit (BACON's ``pe_scale`` 8 for Stanford shapes)."""
    wire_omega0: float = 10.0
    """WIRE's wavelet frequency (the WIRE repository's value for occupancy volumes)."""
    wire_sigma0: float = 40.0
    """WIRE's wavelet inverse width (the WIRE repository's value for occupancy volumes)."""
    gauss_scale: float = 40.0
    """GAUSS's inverse width (the WIRE repository's occupancy script uses sigma0 = 40 for it too)."""
    wire_bands: Annotated[Optional[int], Hidden] = None  # the WIRE PE needs an image size
    sape_embedding: Annotated[Literal["rff", "pe"], Hidden] = "rff"  # SAPE is an image method
    sape_res: Annotated[int, Hidden] = 128
    sape_epsilon: Annotated[float, Hidden] = 1e-3
    bacon_max_frequency: float = 384.0
    """BACON's network sample rate per unit; the finest output of the 8-layer network holds up to half of it
    (BACON: 384)."""
    bacon_schedule: BaconSchedule = "prefix"
    """Bandwidth schedule of a BACON of other than 8 hidden layers: ``prefix``, the first layers of BACON's 8-layer
    SDF network (same filters; 4 layers hold 1/4 of the bandwidth, 48 cycles per unit at 384), or ``spread``, the
    whole bandwidth in fewer, wider filters (at 4 layers such a network does not learn an SDF)."""
    bacon_multiscale: bool = True
    """Train BACON with several outputs (coarse to fine) whose losses are averaged; off: one output."""
    bacon_input_scales: Optional[tuple[float, ...]] = None
    """Bandwidth fraction of each BACON filter (default: the repository's SDF schedule for 8 layers)."""
    bacon_output_layers: Optional[tuple[int, ...]] = None
    """Layers with a BACON output head (default: 2 4 6 8 for 8 layers)."""

    def check(self) -> None:
        """Raise :class:`UsageError` for options no SDF network can be built with."""
        super().check()
        check_fields(self, positive=("bacon_max_frequency",))
        if self.method == "bacon" and self.hidden_layers is not None and self.hidden_layers < 1:
            raise UsageError(f"BACON needs at least one hidden layer, got --hidden-layers {self.hidden_layers}")
        if self.pe == "wire" and self.method.endswith("-pe"):
            raise UsageError("the WIRE PE needs an image size; use --pe loglinear or --pe pow2 for shapes")
        if self.method == "bacon":
            self._check_bacon_schedule(self.resolved().hidden_layers)

    def _check_bacon_schedule(self, layers: int) -> None:
        scales, outputs = self.bacon_input_scales, self.bacon_output_layers
        if scales is not None and len(scales) != layers + 1:
            raise UsageError(f"--bacon-input-scales needs {layers + 1} values (one per filter of {layers} hidden "
                             f"layers), got {len(scales)}")  # fmt: skip
        if outputs is not None and (not outputs or sorted(set(outputs)) != list(outputs) or outputs[0] < 1
                                    or outputs[-1] != layers):  # fmt: skip
            raise UsageError(f"--bacon-output-layers must increase within 1..{layers} and end at {layers} (the "
                             f"hidden layers), got {' '.join(map(str, outputs))}")  # fmt: skip

    def resolved(self) -> "SDFNetworkConfig":
        """A copy with the per-method defaults filled in."""
        layers = self.hidden_layers if self.hidden_layers is not None else DEFAULT_HIDDEN_LAYERS.get(self.method, 7)
        return dataclasses.replace(self, hidden_layers=layers)


def build_sdf_network(config: SDFNetworkConfig, seed: int = 0) -> nn.Module:
    """The network for an SDF fit (3 inputs, 1 output), seeded."""
    if config.method not in SDF_METHODS:
        raise UsageError(f"unknown method {config.method!r}; choose one of {', '.join(SDF_METHODS)}")
    config = config.resolved()
    with seeded(seed):
        if config.method == "bacon":
            scales, outputs = default_schedule(config.hidden_layers, config.bacon_multiscale, config.bacon_schedule)
            if config.bacon_input_scales is not None:
                scales = config.bacon_input_scales
            if config.bacon_output_layers is not None:
                outputs = config.bacon_output_layers
            elif not config.bacon_multiscale:
                outputs = (config.hidden_layers,)
            return Bacon(
                3,
                1,
                config.hidden_features,
                config.hidden_layers,
                max_frequency=config.bacon_max_frequency,
                input_scales=scales,
                output_layers=outputs,
                seed=seed,
            )
        return build_network(config, in_dim=3, out_dim=1)


def network_outputs(network: nn.Module, points: Float[Tensor, "n 3"]) -> list[Float[Tensor, " n"]]:
    """Every output the loss sees (BACON's multiscale outputs, else the one output), as ``[n]`` tensors."""
    if isinstance(network, Bacon):
        return [o.squeeze(-1) for o in network.forward_multiscale(points)]
    return [network(points).squeeze(-1)]


def sdf_loss(
    outputs: list[Float[Tensor, " n"]], target: Float[Tensor, " n"], num_coarse: int, coarse_weight: float = 1e-2
) -> Tensor:
    """BACON's ``overfit_sdf`` loss: ``sum_fine e^2 + coarse_weight * sum_coarse e^2``, with ``e^2`` averaged over
    the outputs. The first ``num_coarse`` samples are the coarse ones."""
    squared = torch.stack([(o - target) ** 2 for o in outputs]).mean(0)
    return squared[num_coarse:].sum() + coarse_weight * squared[:num_coarse].sum()


@dataclass
class SDFTrainConfig:
    """Optimisation and sampling of an SDF fit (defaults: the BACON repository's SDF experiments)."""

    iters: int = 2000
    """Training steps (BACON and the paper train 200,000; the default keeps a CPU fit in minutes)."""
    points_per_step: int = 10_000
    """Samples per step: half coarse, half fine."""
    coarse_scale: float = 0.1
    """Laplace scale of the coarse samples' offsets from the surface."""
    fine_scale: float = 1e-3
    """Laplace scale of the fine samples' offsets from the surface."""
    coarse_weight: float = 1e-2
    """Weight of the coarse samples' squared errors in the loss."""
    lr: Optional[float] = None
    """Initial learning rate of the network (the filter's is set by the line search). Default per method: 1e-3 for
    ReLU MLPs, 1e-4 SIREN, 1e-2 BACON, 5e-3 WIRE and GAUSS."""
    lr_final: float = 1e-4
    """Learning rate at the last step; it decays log-linearly from --lr (BACON). Set equal to --lr for none."""
    grad_clip: float = 1.0
    """Clip the gradient norm to this (BACON: 1); 0 disables."""
    amsgrad: bool = True
    """Adam with AMSGrad (as BACON)."""
    line_search: LineSearchConfig = field(default_factory=LineSearchConfig)
    """The filter's learning rate, set every step by the paper's line search (filtered methods)."""
    filter_lr: Optional[float] = None
    """Without the line search: the filter's initial rate, which follows the network's schedule (default: --lr)."""
    seed: int = 0
    """Seed of the initialisation and of the sampling."""
    device: str = "cpu"
    """Torch device, e.g. cpu or cuda."""
    log_every: int = 50
    """Steps between progress updates and checks for divergence (each reads the losses on the host)."""

    def check(self) -> None:
        """Raise :class:`UsageError` for options that cannot work (before any sampling)."""
        check_fields(self, positive_int=("iters", "log_every"), non_negative_int=("seed",),
                     non_negative=("coarse_weight", "grad_clip"),
                     positive=("coarse_scale", "fine_scale", "lr", "lr_final", "filter_lr"))  # fmt: skip
        if self.points_per_step < 2:
            raise UsageError(f"--points-per-step must be at least 2, got {self.points_per_step}")
        if self.lr is not None and self.lr_final > self.lr:
            raise UsageError(f"--lr-final ({self.lr_final:g}) must not exceed --lr ({self.lr:g}): the rate decays from "
                             "--lr to --lr-final; lower --lr-final too")  # fmt: skip
        self.line_search.check()


@dataclass
class TrainResult:
    """What a training run measured."""

    loss: list[float] = field(default_factory=list)
    """Loss of every step."""
    filter_lr: list[float] = field(default_factory=list)
    """The filter's rate at every step (line search or schedule); empty without a filter."""
    seconds: float = 0.0
    """Wall time of the training loop (sampling included)."""
    cpu_seconds: float = 0.0
    """CPU time of this process during the loop (all its threads; less sensitive to other jobs on the machine)."""
    sampling_seconds: float = 0.0
    """Part of it spent drawing samples (and their exact SDF when sampling fresh)."""
    iters: int = 0
    """Steps done (a diverged fit: up to its last finite state)."""
    steps_run: int = 0
    """Steps trained, those after a diverged fit's last finite state included: what the timings divide by."""
    diverged_at: Optional[int] = None
    """When training diverged: the first step seen non-finite (the network is put back to step ``iters``)."""
    diverged: Optional[str] = None
    """When training diverged: what went non-finite, and what to try."""
    stopped: Optional[str] = None
    """When the time budget stopped training before its last step: how far it got (a checkpoint resumes it)."""
    resumed_at: list[int] = field(default_factory=list)
    """Steps at which this fit was resumed from a checkpoint."""

    @property
    def seconds_per_iter(self) -> float:
        return self.seconds / max(self.steps_run, 1)


Sampler = Union[MeshSDF, SamplePool]


def initial_lr(method: str, train: SDFTrainConfig) -> float:
    return train.lr if train.lr is not None else DEFAULT_LR.get(method, 1e-3)


def train_sdf(
    network: nn.Module,
    sampler: Sampler,
    method: str,
    config: SDFTrainConfig,
    on_step: Optional[Callable[[int, float, Optional[float]], None]] = None,
    checkpoint: Optional[Path] = None,
    settings: str = "",
    stop_at: Optional[float] = None,
    notify: Optional[Callable[[str], None]] = None,
) -> TrainResult:
    """Fit ``network`` to the SDF that ``sampler`` draws from.

    The losses and the line search's rates stay on the device; they are read every ``config.log_every`` steps,
    where a non-finite loss or parameter, or a blown-up loss, stops training: the network is then put back to its
    state of the last sound read, where the result ends (:class:`~rff_field.core.divergence.LastFiniteState`).

    Args:
        network: From :func:`build_sdf_network`.
        sampler: Fresh samples (:class:`MeshSDF`) or a precomputed :class:`SamplePool`.
        method: The method's name (for its default learning rate).
        config: Optimisation settings.
        on_step: Called every ``config.log_every`` steps and after the last with (step, loss, filter rate).
        checkpoint: A file to resume from (when it holds a checkpoint with ``settings``) and to save to every
            ``CHECKPOINT_EVERY_S`` seconds and when training stops at ``stop_at``.
        settings: What the checkpoint must have been written with (:func:`~rff_field.sdf.checkpoint.sdf_settings`).
        stop_at: A ``time.monotonic()`` value; past it, training stops at the next check (every ``log_every``
            steps), saves its checkpoint and marks the result ``stopped``.
        notify: Receives one-line notices (resuming, a checkpoint that cannot be saved); default: print them.

    Raises:
        FitInterrupted: At the end of the step during which Ctrl-C was pressed, after saving the checkpoint.
    """
    notify = notify or print_note
    device = torch.device(config.device)
    network.to(device).train()
    lr = initial_lr(method, config)
    filter_lr = config.filter_lr if config.filter_lr is not None else lr
    optimizer = torch.optim.Adam(named_param_groups(network, lr, filter_lr), amsgrad=config.amsgrad)
    filter_group = param_group(optimizer, FILTER_GROUP)
    total = max(config.iters, 1)
    decay = config.lr_final / lr
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda t: decay ** (min(t, total) / total))
    state: dict[str, Tensor] = {}
    search = attach_line_search(config.line_search, optimizer, lambda: state.get("loss"))
    params = [p for p in network.parameters() if p.requires_grad]
    losses = torch.zeros(config.iters, dtype=torch.float64, device=device)
    scheduled_rates: list[float] = []  # without the line search the rates are numbers: no tensor read
    result = TrainResult()
    filter_params, inr_params = split_filter_parameters(network)
    hints = divergence_hints(lr, filter_lr if filter_params else None, config.line_search, config.lr_final)
    guard = LastFiniteState(network, {"filter": filter_params, "INR": inr_params}, hints)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    rates_before: list[float] = []  # with the line search, the rates of the runs before a resume (it records its own)
    saved = load_checkpoint(checkpoint, SDFCheckpoint, settings, notify)
    first_step = saved.iteration if saved is not None else 0
    result.steps_run = first_step
    before = (saved.seconds, saved.cpu_seconds, saved.sampling_seconds) if saved is not None else (0.0, 0.0, 0.0)
    if saved is not None:
        restore_model(network, optimizer, saved.model, saved.adam)
        set_schedule(scheduler, first_step)
        sampler.load_state(saved.sampler)
        losses[:first_step] = torch.tensor(saved.loss, dtype=losses.dtype)
        result.loss = list(saved.loss)
        if search is not None:
            rates_before = list(saved.filter_lrs)
        else:
            scheduled_rates = list(saved.filter_lrs)
        result.resumed_at = [*saved.resumed, first_step]
        guard.resume(first_step, losses[0].clone())
        notify(f"resuming at step {first_step} of {config.iters} from {checkpoint} (delete it to start over)")
        if on_step is not None and result.loss:  # the progress bar starts where the fit stood
            rates = rates_before or scheduled_rates
            on_step(first_step - 1, result.loss[-1], rates[-1] if rates else None)

    def save(steps: int) -> list[Path]:
        elapsed = (time.perf_counter() - start, time.process_time() - cpu_start, result.sampling_seconds)
        seconds, cpu_seconds, sampling_seconds = (b + e for b, e in zip(before, elapsed))
        rates = rates_before + search.history if search is not None else scheduled_rates
        snapshot = SDFCheckpoint(steps, seconds, settings, model_state(network), adam_state(network, optimizer),
                                 cpu_seconds, sampling_seconds, sampler.state(), result.loss[:steps], rates[:steps],
                                 result.resumed_at)  # fmt: skip
        return [checkpoint] if save_checkpoint(checkpoint, snapshot, notify) else []

    start, cpu_start = time.perf_counter(), time.process_time()
    with fit_stops(config.iters, stop_at, save if checkpoint is not None else None) as stops:
        try:
            for step in range(first_step, config.iters):
                t0 = time.perf_counter()
                batch = sampler.sample(config.points_per_step).to(device)
                result.sampling_seconds += time.perf_counter() - t0
                outputs = network_outputs(network, batch.points)
                loss = sdf_loss(outputs, batch.sdf, batch.num_coarse, config.coarse_weight)
                losses[step] = loss.detach()
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                if config.grad_clip > 0 and search is not None:  # its slopes need the gradient before clipping
                    search.clip_grad_norm_(config.grad_clip)
                elif config.grad_clip > 0:
                    torch.nn.utils.clip_grad_norm_(params, config.grad_clip)
                state["loss"] = loss.detach()
                optimizer.step()
                result.steps_run = step + 1
                if filter_group is not None and search is None:
                    scheduled_rates.append(float(filter_group["lr"]))
                scheduler.step()
                if (step + 1) % config.log_every == 0 or step + 1 == config.iters or stops.requested:
                    checked = len(result.loss)
                    try:
                        guard.check(step + 1, losses[checked : step + 1])
                    except TrainingDiverged as err:  # the network is back at its last finite state, of guard.step
                        result.diverged_at, result.diverged = guard.diverged_at, str(err)
                        break
                    result.loss += losses[checked : step + 1].tolist()
                    if on_step is not None:
                        rate = (search.history if search is not None else scheduled_rates or [None])[-1]
                        on_step(step, result.loss[-1], rate)
                    if stops.stop(step + 1):  # the time budget
                        result.stopped = f"time budget reached after {step + 1} of {config.iters} steps"
                        break
        finally:
            if search is not None:
                search.remove()
    finished = result.stopped is None and result.diverged is None and len(result.loss) == config.iters
    if checkpoint is not None and finished and first_step < config.iters:
        save(config.iters)  # the mesh and metrics take minutes; killed then, the fit resumes with no step to take
    sync()
    result.seconds = before[0] + time.perf_counter() - start
    result.cpu_seconds = before[1] + time.process_time() - cpu_start
    result.sampling_seconds += before[2]
    result.iters = guard.step if result.diverged is not None else len(result.loss)
    del result.loss[result.iters :]
    if filter_group is not None:
        result.filter_lr = (rates_before + search.history if search is not None else scheduled_rates)[: result.iters]
    return result


@torch.no_grad()
def extract_mesh(
    network: nn.Module,
    resolution: int = 256,
    device: Union[str, torch.device] = "cpu",
    batch_size: int = 1 << 16,
    bound: float = 0.5,
    progress: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Marching cubes of the network's zero level set on a ``resolution**3`` grid over ``[-bound, bound]^3`` (a
    progress bar over the grid's slabs if ``progress``).

    Returns:
        Vertices and outward-facing triangles (empty if the level set is not crossed).
    """
    network.to(device).eval()
    description = f"mesh grid {resolution}^3" if progress else None
    values = sample_grid(lambda p: network(p).squeeze(-1), [-bound] * 3, [bound] * 3, resolution, batch_size, device,
                         progress=description)  # fmt: skip
    if not np.isfinite(values).all():
        return np.zeros((0, 3)), np.zeros((0, 3), dtype=np.int64)
    vertices, triangles = marching_cubes(values, [-bound] * 3, [bound] * 3, level=0.0)
    return vertices, orient_outward(vertices, triangles)


def parameter_counts(network: nn.Module) -> dict[str, int]:
    """Trainable parameters: total, of the filter, and of the rest (the INR)."""
    filter_params, _ = split_filter_parameters(network)
    filt = sum(p.numel() for p in filter_params)
    total = count_parameters(network)
    return {"parameters": total, "filter_parameters": filt, "inr_parameters": total - filt}
