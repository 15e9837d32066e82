"""Fit K independent coordinate networks in one process, as one batched computation per step.

``fit_images(jobs)`` trains K jobs (image, :class:`~rff_field.image.fit.FitConfig`, name) of one shape together
and returns what K calls of :func:`~rff_field.image.fit.fit_image` return, one :class:`FitResult` each. Jobs share
a batch when :func:`batch_key` says so: same network shape and forward pass, same image size, same optimisation
settings; seeds, RFF frequencies and scales, and the filter's initialisation may differ (they only change
tensors), as may the image.

Design:

* Each model stays an ordinary module built exactly as ``fit_image`` builds it (its own seed). By default the K
  forward passes run one after another inside the one step; with ``vectorize`` the K copies of each parameter are
  stacked every step (``torch.stack``, differentiable) and the forward pass runs once over the stack with
  ``torch.func.functional_call`` under ``torch.func.vmap`` (batched matrix products). The stacking costs more
  than it saves on a CPU core and on an H200 alike (``benchmarks/gpu/README.md``). Either way the loss is the sum
  of the K models' mean squared errors, so each model's gradient is that of its own loss.
* One Adam holds every model's own parameter groups (``inr`` and ``filter`` per model). Adam is elementwise, so
  over the K models' parameters it does exactly what K separate Adams do, and per-model groups give each model
  its own filter rate: the K filter groups read their ``lr`` from one device vector of rates (each group holds a
  0-dim view of it), written once per step.
* The line search runs per model: :func:`~rff_field.core.line_search.group_slopes` gives the K filter slopes and
  the K INR slopes in one pass, :func:`~rff_field.core.step_rule.filter_step_size_tensor` the K rates from the K
  losses, all on the device. Nothing is read on the host between progress updates.
* Same seeds, same initialisation and the same mini-batch order (one generator per model, seeded as in
  ``fit_image``) as K sequential fits; only the order of floating-point sums inside batched matrix products may
  differ.
"""

from __future__ import annotations

import contextlib
import json
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Callable, NamedTuple, Optional, Sequence

import torch
from jaxtyping import Float
from torch import Tensor, nn
from torch.func import functional_call, vmap

from rff_field.common.checkpoint import load_checkpoint, save_checkpoint, set_schedule
from rff_field.common.machine import resolve_device
from rff_field.common.precision import at_least_float32, autocast, precision_scope
from rff_field.common.progress import print_note, psnr_progress
from rff_field.common.stopping import fit_stops
from rff_field.common.torch_state import seeded
from rff_field.core.divergence import LastFiniteState
from rff_field.core.errors import TrainingDiverged, UsageError
from rff_field.core.filter import FilteredEncoding, split_filter_parameters
from rff_field.core.line_search import group_slopes, rate_dtype, tensor_learning_rate
from rff_field.core.optim import FILTER_GROUP
from rff_field.core.step_rule import step_size_by_rule
from rff_field.image.checkpoint import FitCheckpoint, fit_settings, model_checkpoint, restore_fit
from rff_field.image.data import check_pixels, pixel_coordinates
from rff_field.image.fit import (
    FitConfig,
    FitResult,
    PixelPredictor,
    embedding_cache_fits,
    finish_fit,
    fit_image,
    fixed_embedding,
    mark_unfinished,
    optimizer_groups,
)
from rff_field.image.metrics import psnr_from_mse
from rff_field.inr.config import METHODS, build_network

PER_MODEL_SETTINGS = ("seed", "log_every", "lpips", "dump_embedding", "error_vmax")
"""FitConfig fields that may differ inside a batch (they change no shape, no hyperparameter of the step)."""
PER_MODEL_NETWORK_SETTINGS = ("rff_seed", "rff_sigma", "pe_scale", "filter_init", "filter_init_gain")
"""NetworkConfig fields that may differ inside a batch: they only change the values of tensors."""


class ImageJob(NamedTuple):
    """One fit of a batch: the image, its settings, its name."""

    pixels: Float[Tensor, "H W C"]
    config: FitConfig
    name: str


def batch_key(config: FitConfig, shape: Sequence[int]) -> str:
    """Jobs whose keys are equal can be fitted in one batch (``shape``: the image's ``(H, W, C)``)."""
    settings = asdict(config)
    for name in PER_MODEL_SETTINGS:
        settings.pop(name)
    for name in PER_MODEL_NETWORK_SETTINGS:
        settings["network"].pop(name)
    return json.dumps([settings, list(shape)], sort_keys=True)


class _Predictor(nn.Module):
    """One model's forward pass on pixel coordinates, or on the cached embedding of the pixels."""

    def __init__(self, model: nn.Module, cached: bool) -> None:
        super().__init__()
        self.model = model
        self.cached = cached

    def forward(self, x: Tensor) -> Tensor:
        if not self.cached:
            return self.model(x)
        encoding = self.model.encoding
        if isinstance(encoding, FilteredEncoding):
            x = encoding.apply_filter(x)
        return self.model.mlp(x)


def _gather(values: Tensor, shared: bool, index: Optional[Tensor]) -> Tensor:
    """Rows ``index[k]`` of ``values`` (shared by the models: ``[N, D]``; per model: ``[K, N, D]``) for every model."""
    if index is None:
        return values
    if shared:
        return values[index]
    return values[torch.arange(len(index), device=index.device)[:, None], index]


def fit_images(
    jobs: Sequence[ImageJob],
    progress: bool = False,
    notify: Optional[Callable[[str], None]] = None,
    stop_at: Optional[float] = None,
    vectorize: bool = False,
    checkpoints: Optional[Sequence[Optional[Path]]] = None,
) -> list[FitResult]:
    """Fit the jobs' networks together; returns one result per job, as :func:`fit_image` would.

    Args:
        jobs: Jobs with one :func:`batch_key`.
        progress: Show a progress bar with the models' mean PSNR.
        notify: Receives one-line notices; default: print them.
        stop_at: A ``time.monotonic()`` value; past it, training stops at the next progress check (every
            ``log_every`` iterations of the first job) and the results cover the iterations done, marked
            ``stopped`` in their metrics.
        vectorize: One vmapped forward pass over the stacked models (True) or K passes in one step (False, the
            default). Both give the same results to rounding.
        checkpoints: One file per job (or None) to resume it from and save it to, as ``fit_image``'s
            ``checkpoint``; the jobs of a batch resume at one iteration.

    Raises:
        UsageError: For no jobs, jobs that cannot share a batch, or a method that cannot be batched (SAPE).
        ValueError: For checkpoints that would resume the jobs at different iterations.
    """
    notify = notify or print_note
    if not jobs:
        raise UsageError("fit_images needs at least one job")
    for job in jobs:
        job.config.check()
        check_pixels(job.pixels)
    first = jobs[0].config
    if len({batch_key(job.config, job.pixels.shape) for job in jobs}) > 1:
        raise UsageError("these jobs cannot share a batch: their images' sizes or their settings differ (batch_key)")
    if first.network.method not in METHODS:
        raise UsageError(f"{first.network.method} cannot be batched (its state changes during training)")
    checkpoints = list(checkpoints) if checkpoints is not None else [None] * len(jobs)
    if len(jobs) == 1:  # a batch of one is a fit (which can also replay its step as a CUDA graph)
        result = fit_image(jobs[0].pixels, first, jobs[0].name, progress=progress, notify=notify, stop_at=stop_at,
                           checkpoint=checkpoints[0])  # fmt: skip
        result.metrics.update(engine="batched", batch_models=1, batch_vectorized=False,
                              batch_seconds_per_iter=result.metrics["seconds_per_iter"])  # fmt: skip
        return [result]
    if first.cuda_graph:
        notify("the batched fitter runs without --cuda-graph (a batch of one job uses it)")
    if first.line_search.fused and first.line_search.enabled:
        notify("the batched fitter runs its line search unfused (a batch of one job uses --line-search.fused)")
    device = resolve_device(first.device)
    height, width, channels = jobs[0].pixels.shape
    num_pixels, count = height * width, len(jobs)
    models = []
    for job in jobs:
        with seeded(job.config.seed):
            models.append(build_network(job.config.network, 2, channels, sidelength=max(height, width)).to(device))
    coords = pixel_coordinates(height, width).to(device)
    target = torch.stack([job.pixels.reshape(-1, channels) for job in jobs]).to(device=device, dtype=torch.float32)

    cached = first.cache_embedding and embedding_cache_fits(models[0], coords, count, notify)
    if cached:
        with torch.no_grad():
            inputs = torch.stack([fixed_embedding(model)(coords) for model in models])
        shared = all(torch.equal(inputs[0], features) for features in inputs[1:])
        inputs = inputs[0] if shared else inputs
    else:
        inputs, shared = coords, True
    predictors = [_Predictor(model, cached) for model in models]
    vectorize = bool(vectorize)
    if vectorize:  # what the vmapped pass stacks
        per_model = [dict(predictor.named_parameters()) for predictor in predictors]
        buffers = {name: torch.stack([dict(p.named_buffers())[name] for p in predictors])
                   for name, _ in predictors[0].named_buffers()}  # fmt: skip

    def batched_forward(x: Tensor, per_model_x: bool) -> Tensor:
        if not vectorize:
            return torch.stack([predict(x[k] if per_model_x else x) for k, predict in enumerate(predictors)])
        params = {name: torch.stack([p[name] for p in per_model]) for name in per_model[0]}
        call = lambda p, b, inputs: functional_call(predictors[0], (p, b), (inputs,))  # noqa: E731
        return vmap(call, in_dims=(0, 0, 0 if per_model_x else None))(params, buffers, x)

    groups, lambdas, inr_lr = [], [], 0.0
    for model, job in zip(models, jobs):
        model_groups, model_lambdas, inr_lr = optimizer_groups(model, job.config, num_pixels)
        groups += model_groups
        lambdas += model_lambdas
    optimizer = torch.optim.Adam(groups)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambdas)
    filter_groups = [(optimizer, g) for g in optimizer.param_groups if g["name"] == FILTER_GROUP]
    inr_groups = [(optimizer, g) for g in optimizer.param_groups if g["name"] != FILTER_GROUP]
    search = first.line_search if first.line_search.enabled and filter_groups else None
    rates = torch.zeros(count, dtype=rate_dtype(device), device=device)
    if search is not None:
        for k, (_, group) in enumerate(filter_groups):
            tensor_learning_rate(optimizer, group)  # the optimizer's switches for a tensor rate
            group["lr"] = rates[k]  # a view: the K filter groups read the one vector of rates
    records = torch.zeros(first.iters, count, 4, dtype=torch.float64, device=device)
    filter_lrs: list[float] = []
    mse_history = torch.zeros(first.iters, count, dtype=torch.float64, device=device)
    full_batch = num_pixels <= first.batch_size
    generators = [torch.Generator(device=device).manual_seed(job.config.seed) for job in jobs]
    forward_context = autocast(first.precision, device)

    guards = [
        LastFiniteState(model, dict(zip(("filter", "INR"), split_filter_parameters(model))),
                        job.config.divergence_hints())
        for model, job in zip(models, jobs)
    ]  # fmt: skip
    diverged: list[Optional[TrainingDiverged]] = [None] * count

    settings = [fit_settings(job.config, job.name, job.pixels) for job in jobs]
    saved = [
        load_checkpoint(path, FitCheckpoint, job_settings, notify) for path, job_settings in zip(checkpoints, settings)
    ]
    starts = {checkpoint.iteration if checkpoint is not None else 0 for checkpoint in saved}
    if len(starts) > 1:
        raise ValueError(f"the jobs' checkpoints resume them at different iterations ({sorted(starts)})")
    first_iteration, seconds_before, resumed = starts.pop(), 0.0, []
    for k, checkpoint in enumerate(saved):
        if checkpoint is None:
            continue
        restore_fit(checkpoint, models[k], optimizer, generators[k], guards[k], k, mse_history,
                    records if search is not None else None, filter_lrs)  # fmt: skip
        seconds_before, resumed = checkpoint.seconds, [*checkpoint.resumed, first_iteration]
    if first_iteration:
        set_schedule(scheduler, first_iteration)
        notify(f"resuming {count} fits at iteration {first_iteration} of {first.iters} from their checkpoints")

    def save(iteration: int) -> list[Path]:
        seconds = seconds_before + time.perf_counter() - start
        written = []
        for k, path in enumerate(checkpoints):
            if path is not None and diverged[k] is None:  # a diverged model's fit ends at its last sound state
                state = model_checkpoint(models[k], optimizer, generators[k], iteration, seconds, settings[k],
                                         mse_history[:, k], records[:, k] if search is not None else None,
                                         filter_lrs, resumed)  # fmt: skip
                if save_checkpoint(path, state, notify):
                    written.append(path)
        return written

    bar, task = psnr_progress(progress, first.iters, f"{count} x {first.network.method}", label="mean PSNR")
    if bar is not None:
        bar.update(task, completed=first_iteration)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    keep = any(path is not None for path in checkpoints)
    iters_done = first.iters
    progress_bar = bar if bar is not None else contextlib.nullcontext()
    stopping = fit_stops(first.iters, stop_at, save if keep else None, "iteration")
    with precision_scope(first.precision), progress_bar, stopping as stops:
        for it in range(first_iteration, first.iters):
            order = None
            if not full_batch:
                order = torch.stack([torch.randperm(num_pixels, device=device, generator=g) for g in generators])
            sse = torch.zeros(count, device=device, dtype=torch.float64)
            for begin in range(0, num_pixels, first.batch_size):
                index = None if order is None else order[:, begin : begin + first.batch_size]
                with forward_context:
                    prediction = batched_forward(_gather(inputs, shared, index), index is not None or not shared)
                errors = (at_least_float32(prediction) - _gather(target, False, index)) ** 2
                losses = torch.stack([error.mean() for error in errors])  # each model's loss, as fit_image's
                optimizer.zero_grad(set_to_none=True)
                losses.sum().backward()
                if search is not None:
                    record = _set_rates(losses.detach(), filter_groups, inr_groups, search, rates)
                optimizer.step()
                sse = losses.detach().double() if full_batch else sse + losses.detach() * index.shape[1]
            mse_history[it] = sse if full_batch else sse / num_pixels
            if search is not None:
                records[it] = record  # the last step of the iteration, as fit_image keeps
            if filter_groups and search is None:
                filter_lrs.append(filter_groups[0][1]["lr"])  # the rate of this step
            scheduler.step()
            if (it + 1) % first.log_every == 0 or it + 1 == first.iters or stops.requested:
                for k, guard in enumerate(guards):  # a diverged model is put back at every check; the others go on
                    try:
                        guard.check(it + 1, mse_history[guard.checked_step : it + 1, k])
                    except TrainingDiverged as err:
                        diverged[k] = diverged[k] or err
                if bar is not None:
                    bar.update(task, completed=it + 1, psnr=float(psnr_from_mse(mse_history[it]).mean()))
                if stops.stop(it + 1):  # the time budget
                    iters_done = it + 1
                    break
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    seconds = seconds_before + time.perf_counter() - start
    results = []
    for k, (model, job) in enumerate(zip(models, jobs)):
        forward = PixelPredictor(model, coords, cached)
        done = guards[k].step if diverged[k] is not None else iters_done
        ran = replace(
            job.config, iters=done, cuda_graph=False, line_search=replace(job.config.line_search, fused=False)
        )
        result = finish_fit(model, forward, job.pixels, ran, job.name,
                            mse_history[:done, k], seconds / iters_done / count, inr_lr,
                            filter_lrs[:done] if filter_groups and search is None else None,
                            records[:done, k] if search is not None else None, notify)  # fmt: skip
        result.metrics.update(
            engine="batched",
            batch_models=count,
            batch_vectorized=vectorize,
            batch_seconds_per_iter=seconds / iters_done,
        )
        mark_unfinished(result.metrics, diverged[k], iters_done, job.config.iters)
        if resumed:
            result.metrics["resumed_at"] = resumed
        results.append(result)
    return results


def _set_rates(
    losses: Float[Tensor, " K"],
    filter_groups: list,
    inr_groups: list,
    search,
    rates: Float[Tensor, " K"],
) -> Float[Tensor, "K 4"]:
    """Every model's filter rate from its own loss and slopes (written into ``rates``); returns the records
    (loss, d_filter, lr_d_inr, rate) of the K models."""
    d_filter = group_slopes(filter_groups, direction=search.direction)
    lr_d_inr = group_slopes(inr_groups, direction=search.direction) * inr_groups[0][1]["lr"]  # one INR rate: batch_key
    new = step_size_by_rule(
        search.rule, losses, d_filter, lr_d_inr, search.lr_min, search.lr_max, search.eps, search.c1
    )
    rates.copy_(new)
    return torch.stack([losses.double(), d_filter, lr_d_inr, new], dim=1)
