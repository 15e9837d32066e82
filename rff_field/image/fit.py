"""2D image regression: fit a coordinate network to one image (the WIRE repository's protocol).

Plain Python, no command-line dependency: ``fit_image(pixels, FitConfig(...))`` trains and returns a
:class:`FitResult`; ``write_fit_outputs`` writes ``reconstruction.png``, ``error.png``, ``curves.png``,
``model.pt`` and ``metrics.json``; ``run_fit`` does both from a file path. ``rff-image fit``
(``rff_field.cli.image``) is a thin front end.

Protocol (WIRE repository, image representation): coordinates in [-1, 1]; full batch up to ``batch_size``
pixels, shuffled mini-batches beyond (one iteration = one pass over the image, as that repository counts);
Adam, with the learning rate scaled by ``min(1, batch_size / pixels)`` and decayed by ``0.1**(t / T)``;
PSNR of an iteration from the training MSE of its pass (before the update), so it costs nothing extra.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Annotated, Callable, Literal, Optional, Union

import numpy as np
import torch
from jaxtyping import Float
from torch import Tensor, nn

from rff_field.common.checkpoint import (
    CHECKPOINT_FILE,
    check_resumable,
    holds_unfinished_fit,
    load_checkpoint,
    model_state,
    save_checkpoint,
    set_schedule,
)
from rff_field.common.cuda_graph import GraphedStep
from rff_field.common.locks import exclusive_folder
from rff_field.common.machine import machine_description, memory_bytes, resolve_device
from rff_field.common.options import NoPrefix
from rff_field.common.outputs import (
    check_input_kept,
    check_output_files,
    clear_outputs,
    new_figure,
    save_figure,
    write_json,
    write_torch,
    written_atomically,
)
from rff_field.common.precision import PRECISIONS, Precision, at_least_float32, autocast, precision_scope
from rff_field.common.progress import print_note, psnr_progress
from rff_field.common.stopping import FitInterrupted, fit_stops
from rff_field.common.torch_state import seeded
from rff_field.common.trained import WEIGHTS_FILE
from rff_field.core.divergence import LastFiniteState, divergence_hints
from rff_field.core.errors import TrainingDiverged, UsageError, check_fields
from rff_field.core.filter import FilteredEncoding, split_filter_parameters
from rff_field.core.line_search import tensor_learning_rate
from rff_field.core.optim import FILTER_GROUP, LineSearchConfig, attach_line_search, named_param_groups, param_group
from rff_field.image.checkpoint import FitCheckpoint, fit_settings, model_checkpoint, restore_fit
from rff_field.image.data import LoadedImage, check_pixels, downsample, load_image, pixel_coordinates, save_image
from rff_field.image.metrics import image_metrics, psnr_from_mse
from rff_field.inr.config import METHODS, NetworkConfig, build_network, count_parameters
from rff_field.inr.mlp import FourierFeatureMLP

IMAGE_METHODS: tuple[str, ...] = (*METHODS, "sape")
"""Every method ``rff-image`` fits (SAPE is 2D-only, so it is not in ``networks.METHODS``)."""

DEFAULT_LR = {"wire": 5e-3, "siren": 1e-3, "gauss": 1e-3}
"""Learning rates of the WIRE repository; every other method (ReLU + PE/RFF, filtered) uses 1e-3."""

RENDERS = "render-x*.png"
"""The default names of ``rff-image render`` outputs in a fit's folder (stale once the fit is run again)."""
OUTPUT_FILES = ("metrics.json", "reconstruction.png", "error.png", "curves.png", "embedding.png", WEIGHTS_FILE)


@dataclass
class FitConfig:
    """How to fit one image: the network and the optimisation (defaults: the WIRE repository's image fitting)."""

    network: Annotated[NetworkConfig, NoPrefix] = field(default_factory=NetworkConfig)
    """The coordinate network."""
    iters: int = 2000
    """Iterations (passes over the image; one optimizer step each when the image fits in one batch)."""
    lr: Optional[float] = None
    """Learning rate of the INR (everything but the filter); default per method: WIRE 5e-3, others 1e-3."""
    lr_decay: float = 0.1
    """The INR's rate decays as ``lr * lr_decay**(t / iters)`` (LambdaLR, WIRE repository)."""
    batch_size: int = 65536
    """Pixels per optimizer step: full batch up to this many pixels, shuffled mini-batches beyond."""
    scale_lr_with_batch: bool = True
    """Multiply the INR's learning rate by ``min(1, batch_size / pixels)`` as the WIRE repository does (the filter's
    rate and the line search's bounds are not scaled)."""
    line_search: LineSearchConfig = field(default_factory=LineSearchConfig)
    """The filter's learning rate, set every step by the paper's line search (filtered methods only)."""
    filter_lr: float = 1e-3
    """Without the line search: the filter's learning rate."""
    filter_schedule: bool = False
    """Without line search: decay the filter's rate with the INR's schedule instead of keeping it constant."""
    seed: int = 0
    """Seed of the network's initialisation and the mini-batch order (RFF frequencies use ``rff_seed``)."""
    device: Literal["auto", "cpu", "cuda"] = "auto"
    """Where to train: ``auto`` picks CUDA when available."""
    log_every: int = 50
    """Iterations between progress updates (each costs one device synchronisation)."""
    lpips: bool = True
    """Compute LPIPS (needs AlexNet weights: downloaded once, skipped with a notice when offline)."""
    dump_embedding: int = 0
    """Write ``embedding.png`` with this many channels of the embedding (and of the filtered embedding) over the
    image; 0 writes none."""
    cache_embedding: bool = True
    """Compute the fixed Fourier embedding of the pixel grid once instead of every step (same result, faster;
    skipped with a notice where it would take over a quarter of the memory)."""
    error_vmax: float = 0.1
    """Absolute error mapped to the top of the colour scale of ``error.png``."""
    precision: Precision = "fp32"
    """Arithmetic: ``fp32``; ``tf32``: TensorFloat-32 matrix products on a GPU (no effect on a CPU); ``bf16``: the
    forward pass under bfloat16 autocast (parameters, optimizer and loss stay float32)."""
    cuda_graph: bool = False
    """On a GPU: capture the training step in a CUDA graph after three eager steps and replay it (the same steps,
    launched at once instead of one operation at a time; the learning rates become tensors). Needs mini-batches of
    one size; SAPE runs without it. On a CPU the same step runs eagerly."""

    def check(self) -> None:
        """Raise :class:`UsageError` for options that cannot work (before any data is loaded)."""
        self.network.check()
        check_fields(self, positive_int=("iters", "batch_size", "log_every"),
                     non_negative_int=("dump_embedding", "seed"), positive=("lr", "lr_decay", "error_vmax"),
                     non_negative=("filter_lr",))  # fmt: skip
        self.line_search.check()
        if self.precision not in PRECISIONS:
            raise UsageError(f"--precision must be one of {', '.join(PRECISIONS)}, got {self.precision!r}")

    def inr_lr(self) -> float:
        """The INR's base learning rate (before batch scaling and decay)."""
        return self.lr if self.lr is not None else DEFAULT_LR.get(self.network.method, 1e-3)

    def divergence_hints(self) -> list[str]:
        """What to try when this fit diverges."""
        filtered = self.network.method.startswith("filtered-")
        return divergence_hints(self.inr_lr(), self.filter_lr if filtered else None, self.line_search)


@dataclass
class FitResult:
    """What a fit produced.

    Args:
        metrics: Everything that goes into ``metrics.json``.
        reconstruction: The final network output on the pixel grid (not clipped).
        target: The fitted image.
        embedding: Channels ``[K, H, W]`` of the embedding, filtered and not, when requested.
        weights: The trained network's ``state_dict``, on the CPU (written as ``model.pt``).
    """

    metrics: dict
    reconstruction: Float[Tensor, "H W C"]
    target: Float[Tensor, "H W C"]
    embedding: dict[str, np.ndarray] = field(default_factory=dict)
    weights: dict[str, Tensor] = field(default_factory=dict)


class PixelPredictor:
    """The network's forward pass on pixel indices, with the fixed embedding of the grid computed once.

    For ``mlp-*``/``filtered-*`` networks the Fourier embedding of the pixel grid does not change during
    training; with ``cache`` it is computed once and only the filter and MLP run every step.
    """

    def __init__(
        self,
        model: nn.Module,
        coords: Float[Tensor, "N 2"],
        cache: bool,
        notify: Optional[Callable[[str], None]] = None,
    ) -> None:
        self.model = model
        self.coords = coords
        self.features: Optional[Tensor] = None
        if cache and embedding_cache_fits(model, coords, 1, notify):
            with torch.no_grad():
                self.features = fixed_embedding(model)(coords)

    def __call__(self, index: Union[Tensor, slice, None] = None) -> Tensor:
        if self.features is None:
            return self.model(self.coords if index is None else self.coords[index])
        gamma = self.features if index is None else self.features[index]
        encoding = self.model.encoding
        if isinstance(encoding, FilteredEncoding):
            gamma = encoding.apply_filter(gamma)
        return self.model.mlp(gamma)

    def predict_all(self, chunk: int) -> Tensor:
        """The prediction for every pixel, ``chunk`` pixels at a time (a 12-megapixel image at once would hold
        gigabytes of activations)."""
        count = self.coords.shape[0]
        return torch.cat([self(slice(start, start + chunk)) for start in range(0, count, chunk)])


EMBEDDING_DUMP_CHUNK = 65536


def fixed_embedding(model: FourierFeatureMLP) -> nn.Module:
    """The Fourier embedding of ``model``, without its filter."""
    encoding = model.encoding
    return encoding.encoding if isinstance(encoding, FilteredEncoding) else encoding


def embedding_cache_fits(
    model: nn.Module, coords: Tensor, copies: int, notify: Optional[Callable[[str], None]] = None
) -> bool:
    """Whether ``copies`` embeddings of ``coords`` can be cached: ``model`` has a fixed embedding and they take at
    most a quarter of the device's memory (a 12-megapixel photo at 256 channels would take 12 GB)."""
    if not isinstance(model, FourierFeatureMLP):
        return False
    channels = fixed_embedding(model).get_out_dim()
    size = copies * coords.shape[0] * channels * coords.element_size()
    memory = memory_bytes(coords.device)
    if memory is None or size <= memory // 4:
        return True
    if notify is not None:
        jobs = f" x {copies} jobs" if copies > 1 else ""
        amount = f"{size / 2**30:.1f} GiB" if size >= 2**30 else f"{size / 2**20:.1f} MiB"
        notify(f"the embedding of {coords.shape[0]:,} pixels x {channels} channels{jobs} ({amount}) would take over "
               "a quarter of the memory: it is computed every step for the batch instead of cached")  # fmt: skip
    return False


def optimizer_groups(
    model: nn.Module, config: FitConfig, num_pixels: int
) -> tuple[list[dict], list[Callable[[int], float]], float]:
    """Adam's parameter groups for ``model`` (``inr`` and, with a filter, ``filter``), the LambdaLR factor of each
    group, and the INR's rate (scaled by the batch as the WIRE repository does)."""
    batch_scale = min(1.0, config.batch_size / num_pixels) if config.scale_lr_with_batch else 1.0
    inr_lr = config.inr_lr() * batch_scale
    # The filter's fixed rate is not scaled, as the line search's bounds are not: the ablation compares like rates.
    groups = named_param_groups(model, inr_lr, config.filter_lr)
    decay = lambda step: config.lr_decay ** min(step / config.iters, 1.0)  # noqa: E731
    constant = lambda step: 1.0  # noqa: E731
    scheduled = config.filter_schedule and not config.line_search.enabled
    lambdas = [constant if group["name"] == FILTER_GROUP and not scheduled else decay for group in groups]
    return groups, lambdas, inr_lr


def fit_image(
    pixels: Float[Tensor, "H W C"],
    config: FitConfig,
    name: str = "image",
    progress: bool = True,
    notify: Optional[Callable[[str], None]] = None,
    stop_at: Optional[float] = None,
    checkpoint: Optional[Path] = None,
) -> FitResult:
    """Fit ``config.network`` to an image of values in [0, 1].

    Nothing is read on the host between progress updates (every ``log_every`` iterations): the losses, the
    filter's rates and the line search's records stay on the device until the end.

    Args:
        pixels: The image.
        config: Network and optimisation settings.
        name: Name of the image, recorded in the metrics.
        progress: Show a rich progress bar with the current PSNR.
        notify: Called with one-line notices (e.g. LPIPS unavailable); default: print them.
        stop_at: A ``time.monotonic()`` value; past it, training stops at the next progress check (every
            ``log_every`` iterations) and the result covers the iterations done, marked ``stopped``.
        checkpoint: A file to resume from (when it holds a checkpoint of this fit: same settings, same image) and
            to save to when the fit stops at ``stop_at``, and every ``CHECKPOINT_EVERY_S`` seconds.
    """
    notify = notify or print_note
    config.check()
    check_pixels(pixels)
    device = resolve_device(config.device)
    height, width, channels = pixels.shape
    num_pixels = height * width
    with seeded(config.seed):
        model = build_network(config.network, 2, channels, sidelength=max(height, width)).to(device)
    if config.dump_embedding and not isinstance(model, FourierFeatureMLP):
        notify("--dump-embedding applies to mlp-*/filtered-* methods only; no embedding.png will be written")
    coords = pixel_coordinates(height, width).to(device)
    target = pixels.reshape(-1, channels).to(device=device, dtype=torch.float32)
    forward = PixelPredictor(model, coords, config.cache_embedding, notify)
    progressive = model if hasattr(model, "observe_error") else None  # SAPE
    if progressive is not None:
        progressive.configure(config.iters)

    groups, lambdas, inr_lr = optimizer_groups(model, config, num_pixels)
    optimizer = torch.optim.Adam(groups)
    filter_group = param_group(optimizer, FILTER_GROUP)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambdas)
    step_loss: dict[str, Tensor] = {}
    line_search = attach_line_search(config.line_search, optimizer, loss_fn=lambda: step_loss["loss"])

    mse_history = torch.zeros(config.iters, device=device, dtype=torch.float64)
    filter_lrs: list[float] = []  # without the line search: numbers set by the schedule, no tensor read
    filter_params, inr_params = split_filter_parameters(model)
    guard = LastFiniteState(model, {"filter": filter_params, "INR": inr_params}, config.divergence_hints())
    diverged: Optional[TrainingDiverged] = None
    full_batch = num_pixels <= config.batch_size
    generator = torch.Generator(device=device).manual_seed(config.seed)

    graphed = config.cuda_graph  # off CUDA the same step runs eagerly, from the same buffers
    if graphed and (progressive is not None or not (full_batch or num_pixels % config.batch_size == 0)):
        notify(f"--cuda-graph needs mini-batches of one size ({num_pixels} pixels in batches of {config.batch_size}) "
               "and no SAPE; this fit runs without it")  # fmt: skip
        graphed = False
    if graphed:  # a captured step reads its rates from tensors that the scheduler fills in place
        for group in optimizer.param_groups:
            if not isinstance(group["lr"], Tensor):
                tensor_learning_rate(optimizer, group)
    forward_context = autocast(config.precision, device, cache=not graphed)
    search_records = (
        torch.zeros(config.iters, 4, dtype=torch.float64, device=device) if line_search is not None else None
    )
    filter_slot = optimizer.param_groups.index(filter_group) if filter_group is not None else None
    last: dict[str, Tensor] = {}

    def train_step(index: Optional[Tensor]) -> Tensor:
        with forward_context:
            prediction = forward(index)
        batch_target = target if index is None else target[index]
        loss = torch.mean((at_least_float32(prediction) - batch_target) ** 2)
        step_loss["loss"] = loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        del step_loss["loss"]  # the step's autograd graph goes with it (a CUDA graph's capture needs that)
        if progressive is not None:
            last["error"] = (at_least_float32(prediction.detach()) - batch_target).square().mean(-1)
        return loss.detach()

    batch_index = torch.zeros(min(config.batch_size, num_pixels), dtype=torch.long, device=device)
    graph_step = GraphedStep(
        lambda: train_step(None if full_batch else batch_index), enabled=graphed and device.type == "cuda"
    )

    settings = fit_settings(config, name, pixels)
    saved = load_checkpoint(checkpoint, FitCheckpoint, settings, notify)
    first_iteration, seconds_before, resumed = 0, 0.0, []
    if saved is not None:
        restore_fit(saved, model, optimizer, generator, guard, None, mse_history, search_records, filter_lrs)
        set_schedule(scheduler, saved.iteration)
        first_iteration, seconds_before, resumed = saved.iteration, saved.seconds, [*saved.resumed, saved.iteration]
        notify(f"resuming at iteration {first_iteration} of {config.iters} from {checkpoint} (delete it to start over)")

    def save(iteration: int) -> list[Path]:
        seconds = seconds_before + time.perf_counter() - start
        state = model_checkpoint(model, optimizer, generator, iteration, seconds, settings, mse_history,
                                 search_records, filter_lrs, resumed)  # fmt: skip
        return [checkpoint] if save_checkpoint(checkpoint, state, notify) else []

    bar, task = psnr_progress(progress, config.iters, f"{name} {config.network.method}")
    if bar is not None:
        bar.update(task, completed=first_iteration)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    iters_run = config.iters
    progress_bar = bar if bar is not None else contextlib.nullcontext()
    stopping = fit_stops(config.iters, stop_at, save if checkpoint is not None else None, "iteration")
    with precision_scope(config.precision), progress_bar, stopping as stops:
        for it in range(first_iteration, config.iters):
            order = None if full_batch else torch.randperm(num_pixels, device=device, generator=generator)
            sse = torch.zeros((), device=device, dtype=torch.float64)
            for begin in range(0, num_pixels, config.batch_size):
                index = None if order is None else order[begin : begin + config.batch_size]
                if graphed and index is not None:
                    batch_index.copy_(index)
                loss = graph_step() if graphed else train_step(index)
                if full_batch:
                    sse = loss
                else:
                    sse += loss * index.numel()
                if progressive is not None:
                    progressive.observe_error(last["error"], coords if index is None else coords[index])
            mse_history[it] = sse if full_batch else sse / num_pixels
            if search_records is not None:
                search_records[it] = line_search.last_record  # the last step of the iteration
            if filter_slot is not None and line_search is None:  # the rate LambdaLR set for this step, no tensor read
                filter_lrs.append(optimizer.param_groups[filter_slot]["initial_lr"] * lambdas[filter_slot](it))
            scheduler.step()
            if progressive is not None:
                progressive.end_iteration(it)
            if (it + 1) % config.log_every == 0 or it + 1 == config.iters or stops.requested:
                try:
                    guard.check(it + 1, mse_history[guard.checked_step : it + 1])
                except TrainingDiverged as err:  # the model is back at its last finite state, of iteration guard.step
                    diverged, iters_run = err, it + 1
                    break
                if bar is not None:
                    bar.update(task, completed=it + 1, psnr=float(psnr_from_mse(float(mse_history[it]))))
                if stops.stop(it + 1):  # the time budget
                    iters_run = it + 1
                    break
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    seconds_per_iter = (seconds_before + time.perf_counter() - start) / iters_run
    # measuring and writing take a while: from this checkpoint an interrupted run goes straight to them
    saved_last = []
    if checkpoint is not None and diverged is None:
        trained_to_end = first_iteration < iters_run == config.iters  # else the stop or the resumed file holds it
        saved_last = save(iters_run) if trained_to_end else [checkpoint] * checkpoint.is_file()
    search = None
    done = guard.step if diverged is not None else iters_run
    if line_search is not None:
        line_search.remove()
        search = search_records[:done]
    try:
        result = finish_fit(model, forward, pixels, replace(config, iters=done), name, mse_history[:done],
                            seconds_per_iter, inr_lr, filter_lrs[:done] if filter_group is not None else None, search,
                            notify)  # fmt: skip
    except KeyboardInterrupt:
        raise FitInterrupted(f"interrupted after training ({done} iterations), while measuring", saved_last) from None
    mark_unfinished(result.metrics, diverged, iters_run, config.iters)
    if resumed:
        result.metrics["resumed_at"] = resumed
    return result


def mark_unfinished(metrics: dict, diverged: Optional[TrainingDiverged], iters_run: int, iters: int) -> None:
    """Record in ``metrics`` why a fit ended before its ``iters`` iterations: divergence, or the time budget after
    ``iters_run`` (nothing for a finished fit)."""
    if diverged is not None:
        metrics.update(diverged=str(diverged), iters_requested=iters)
    elif iters_run < iters:
        metrics.update(stopped=f"time budget reached after {iters_run} of {iters} iterations", iters_requested=iters)


def finish_fit(
    model: nn.Module,
    forward: PixelPredictor,
    pixels: Float[Tensor, "H W C"],
    config: FitConfig,
    name: str,
    mse_history: Float[Tensor, " iters"],
    seconds_per_iter: float,
    inr_lr: float,
    filter_lrs: Optional[list[float]],
    search: Optional[Float[Tensor, "iters 4"]],
    notify: Callable[[str], None],
) -> FitResult:
    """The reconstruction and metrics of a trained model (shared by :func:`fit_image` and the batched fitter).

    Args:
        model: The trained network.
        forward: Its forward pass on the pixel grid.
        pixels: The fitted image.
        config: The fit's settings.
        name: The image's name.
        mse_history: Training MSE of every iteration.
        seconds_per_iter: Wall time per iteration.
        inr_lr: The INR's initial rate.
        filter_lrs: Without the line search, the filter's rate of every iteration (None without a filter).
        search: With the line search, its record (loss, d_filter, lr_d_inr, rate) at the last step of every
            iteration.
        notify: Receives one-line notices.
    """
    height, width, channels = pixels.shape
    num_pixels = height * width
    target = pixels.reshape(-1, channels).to(forward.coords.device, torch.float32)
    with torch.no_grad(), autocast(config.precision, forward.coords.device):
        reconstruction = at_least_float32(forward.predict_all(config.batch_size)).reshape(height, width, channels)
    final_mse = float(torch.mean((reconstruction.reshape(-1, channels) - target) ** 2))
    psnr_history = [float(psnr_from_mse(m)) for m in mse_history.cpu().tolist()]
    quality = image_metrics(reconstruction.cpu(), pixels.float(), with_lpips=config.lpips, notify=notify)
    history = np.asarray(psnr_history, dtype=float)
    best_iter = int(np.argmax(np.where(np.isnan(history), -np.inf, history))) if len(history) else 0
    best_psnr = psnr_history[best_iter] if len(history) else -np.inf
    if not best_psnr >= float(psnr_from_mse(final_mse)):  # also when the history holds only NaNs
        best_psnr, best_iter = float(psnr_from_mse(final_mse)), config.iters

    search_rows = search.cpu().tolist() if search is not None else None
    if search_rows is not None:
        filter_lrs = [row[3] for row in search_rows]
    num_params = count_parameters(model)
    num_filter_params = sum(p.numel() for p in split_filter_parameters(model)[0])
    device = forward.coords.device
    metrics = {
        "method": config.network.method,
        "image": name,
        "height": height,
        "width": width,
        "channels": channels,
        "iters": config.iters,
        "psnr": quality["psnr"],
        "best_psnr": best_psnr,
        "best_iter": best_iter,
        "ssim": quality["ssim"],
        "lpips": quality["lpips"],
        "seconds_per_iter": seconds_per_iter,
        "num_params": num_params,
        "num_filter_params": num_filter_params,
        "num_values": num_pixels * channels,
        "params_per_value": num_params / (num_pixels * channels),
        "embedding_dim": _embedding_dim(model),
        "inr_lr": inr_lr,
        "line_search": search is not None,
        "device": str(device),
        "machine": machine_description(device),
        "seed": config.seed,
        "config": asdict(config),
        "psnr_history": psnr_history,
        "filter_lr_history": filter_lrs,
        "line_search_history": {
            key: [row[i] for row in search_rows] for i, key in enumerate(("loss", "d_filter", "lr_d_inr"))
        }
        if search_rows is not None
        else None,
    }
    if hasattr(model, "summary"):  # SAPE's progression
        metrics.update(model.summary())
    embedding = _embedding_channels(model, forward.coords, height, width, config.dump_embedding)
    return FitResult(metrics, reconstruction.cpu(), pixels.float(), embedding, model_state(model))


def _embedding_dim(model: nn.Module) -> Optional[int]:
    encoding = getattr(model, "encoding", None)
    return encoding.get_out_dim() if encoding is not None else None


@torch.no_grad()
def _embedding_channels(model: nn.Module, coords: Tensor, height: int, width: int, count: int) -> dict[str, np.ndarray]:
    """``count`` evenly spaced channels of gamma and of f(gamma) * gamma over the pixel grid, ``[K, H, W]``."""
    if count <= 0 or not isinstance(model, FourierFeatureMLP):  # the fit said so before training
        return {}
    encoding = model.encoding
    base = fixed_embedding(model)
    channels = torch.linspace(0, base.get_out_dim() - 1, min(count, base.get_out_dim())).round().long()
    gamma, filtered = [], []
    for start in range(0, coords.shape[0], EMBEDDING_DUMP_CHUNK):  # only the K channels of the whole grid are kept
        chunk = base(coords[start : start + EMBEDDING_DUMP_CHUNK])
        gamma.append(chunk[:, channels])
        if isinstance(encoding, FilteredEncoding):
            filtered.append(encoding.apply_filter(chunk)[:, channels])
    out = {"channels": channels.cpu().numpy()}
    for key, parts in (("gamma", gamma), ("filtered", filtered)):
        if parts:
            out[key] = torch.cat(parts).T.reshape(-1, height, width).cpu().numpy()
    return out


def write_fit_outputs(result: FitResult, out_dir: Path, error_vmax: float = 0.1, overwrite: bool = False) -> None:
    """Write ``metrics.json``, ``reconstruction.png``, ``error.png``, ``curves.png``, ``model.pt`` (and
    ``embedding.png``).

    Raises:
        UsageError: If ``out_dir`` already holds any of these files and ``overwrite`` is False.
    """
    out_dir = Path(out_dir)
    check_output_dir(out_dir, overwrite)
    out_dir.mkdir(parents=True, exist_ok=True)
    # An earlier run's files that this one may not write (e.g. embedding.png), and renders of its weights.
    clear_outputs(out_dir, (*OUTPUT_FILES, RENDERS))
    save_image(result.reconstruction, out_dir / "reconstruction.png")
    error = (result.reconstruction.clamp(0, 1) - result.target).abs().mean(dim=-1).numpy()

    from matplotlib.image import imsave

    with written_atomically(out_dir / "error.png") as temporary:
        imsave(temporary, error, cmap="inferno", vmin=0.0, vmax=error_vmax)
    plot_curves(result.metrics, out_dir / "curves.png")
    if result.embedding:
        plot_embedding(result.embedding, out_dir / "embedding.png")
    if result.weights:
        write_torch(out_dir / WEIGHTS_FILE, result.weights)
    write_json(out_dir / "metrics.json", result.metrics)  # last: a benchmark job is finished once it exists


def check_output_dir(out_dir: Path, overwrite: bool) -> None:
    """Refuse a folder that cannot be written, or that already holds fit outputs unless ``overwrite``."""
    check_output_files(out_dir, OUTPUT_FILES, overwrite, "--out")


def plot_curves(metrics: dict, path: Path) -> None:
    """PSNR over iterations and, where there is a filter, its learning rate over iterations."""

    lrs = metrics.get("filter_lr_history")
    fig, axes = new_figure(1, 2 if lrs else 1, figsize=(10 if lrs else 5, 3.6), squeeze=False)
    psnrs = np.array([np.nan if p is None else p for p in metrics["psnr_history"]], dtype=float)
    ax = axes[0, 0]
    ax.plot(np.arange(1, len(psnrs) + 1), psnrs, lw=1)
    ax.set_xlabel("iteration")
    ax.set_ylabel("PSNR (dB)")
    ax.set_title(f"{metrics['method']} on {metrics['image']}: best {metrics['best_psnr']:.2f} dB")
    if not np.isfinite(psnrs).any():  # a fit that diverged at once keeps no history; an exact one has no finite PSNR
        exact = np.isposinf(psnrs).any()
        reason = "the fit is exact (PSNR infinite)" if exact else "the fit diverged at once"
        ax.text(0.5, 0.5, f"no iteration to plot: {reason}", ha="center", transform=ax.transAxes)
        ax.set_xticks([])
        ax.set_yticks([])
    ax.grid(alpha=0.3)
    if lrs:
        ax = axes[0, 1]
        ax.plot(np.arange(1, len(lrs) + 1), lrs, lw=1)
        ax.set_xlabel("iteration")
        ax.set_ylabel("filter learning rate")
        ax.set_title("line search" if metrics.get("line_search") else "constant / scheduled")
        if min(lrs) > 0:
            ax.set_yscale("log")
        ax.grid(alpha=0.3)
    save_figure(fig, path, dpi=120)


def plot_embedding(embedding: dict[str, np.ndarray], path: Path) -> None:
    """A grid of embedding channels: one row of gamma, one of f(gamma) * gamma when filtered."""

    rows = [key for key in ("gamma", "filtered") if key in embedding]
    count = len(embedding["channels"])
    fig, axes = new_figure(len(rows), count, figsize=(1.6 * count, 1.4 * len(rows) + 0.3), squeeze=False)
    for r, key in enumerate(rows):
        for c in range(count):
            ax = axes[r, c]
            ax.imshow(embedding[key][c], cmap="gray")
            ax.set_xticks([])
            ax.set_yticks([])
            if r == 0:
                ax.set_title(f"ch {int(embedding['channels'][c])}", fontsize=8)
            if c == 0:
                ax.set_ylabel("γ" if key == "gamma" else "f(γ)⊙γ")
    save_figure(fig, path, dpi=120)


def prepare_image(path: Optional[Path], factor: Optional[int]) -> LoadedImage:
    """Load ``path`` (or the bundled astronaut) and area-downsample it.

    Args:
        path: Image file, or None for scikit-image's astronaut.
        factor: Downsampling factor; None means 1 for a file and 4 for the bundled image (128x128, CPU-sized).
    """
    image = load_image(path)
    factor = factor if factor is not None else (4 if path is None else 1)
    image.pixels = downsample(image.pixels, factor)
    return image


def run_fit(
    image: Optional[Path],
    out_dir: Path,
    config: Optional[FitConfig] = None,
    downsample_factor: Optional[int] = None,
    overwrite: bool = False,
    progress: bool = True,
    notify: Optional[Callable[[str], None]] = None,
    extra_metrics: Optional[dict] = None,
) -> dict:
    """Load, fit and write outputs; returns the metrics. The function a GPU script calls.

    A long fit saves a checkpoint in ``out_dir`` every few minutes; run again with the same settings after it was
    killed, it resumes there. The checkpoint is removed once the outputs are written.

    Args:
        image: Image file (None: scikit-image's astronaut).
        out_dir: Folder for the outputs.
        config: Fit settings (default ``FitConfig()``).
        downsample_factor: Area-downsampling factor (None: see :func:`prepare_image`).
        overwrite: Replace earlier outputs in ``out_dir``.
        progress: Show a progress bar.
        notify: Receives one-line notices (default: print).
        extra_metrics: Entries added to ``metrics.json`` (e.g. a benchmark's labels).
    """
    config = config or FitConfig()
    notify = notify or print_note
    config.check()
    out_dir = Path(out_dir)
    checkpoint = out_dir / CHECKPOINT_FILE  # saved now and then; a killed run resumes from it
    interrupted = holds_unfinished_fit(out_dir)
    check_output_dir(out_dir, overwrite or interrupted)
    check_input_kept(image, "--image", out_dir, (*OUTPUT_FILES, CHECKPOINT_FILE))
    loaded = prepare_image(image, downsample_factor)
    for notice in loaded.notices:
        notify(notice)
    with exclusive_folder(out_dir, "rff-image fit"):
        check_resumable(checkpoint, FitCheckpoint, fit_settings(config, loaded.name, loaded.pixels), overwrite)
        result = fit_image(loaded.pixels, config, name=loaded.name, progress=progress, notify=notify,
                           checkpoint=checkpoint)  # fmt: skip
        result.metrics["source"] = loaded.source
        result.metrics["downsample"] = downsample_factor if downsample_factor is not None else 4 if image is None else 1
        result.metrics.update(extra_metrics or {})
        try:
            write_fit_outputs(result, out_dir, error_vmax=config.error_vmax, overwrite=overwrite or interrupted)
        except KeyboardInterrupt:
            saved = [checkpoint] if checkpoint.is_file() else []
            raise FitInterrupted("interrupted while writing the outputs", saved) from None
        checkpoint.unlink(missing_ok=True)
    if "diverged" in result.metrics:
        raise TrainingDiverged(f"{result.metrics['diverged']}; its outputs are in {out_dir}, marked diverged")
    return result.metrics
