"""2D image regression on the fit loop with the WIRE repository's protocol: coordinates in [-1, 1], full batch up to
``batch_size`` pixels (shuffled mini-batches beyond), the INR's rate scaled by ``min(1, batch_size / pixels)``."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Annotated

import torch
from jaxtyping import Float
from torch import Tensor, nn

from rff_field.common.machine import TRAINING_BYTES_PER_PARAMETER, bytes_per_sample, check_memory, machine_description
from rff_field.common.options import Flat
from rff_field.common.outputs import claimed_folder, save_image, write_json, write_torch
from rff_field.common.torch_state import seeded
from rff_field.common.trained import WEIGHTS_FILE, config_from_dict, load_trained_network
from rff_field.core.embedding import EmbeddingConfig, warn_if_aliased
from rff_field.core.errors import check_fields
from rff_field.fit.bench import check_fit_folder
from rff_field.fit.checkpoint import CHECKPOINT_FILE, content_digest, settings_key
from rff_field.fit.loop import HISTORY_BYTES_PER_STEP, FitTask, TrainConfig, train
from rff_field.image.data import check_pixels, pixel_coordinates
from rff_field.image.metrics import image_metrics, psnr_from_mse
from rff_field.image.plots import plot_comparison, plot_curves
from rff_field.inr.config import NetworkConfig, build_network, count_parameters, network_label, parameter_metrics

DEFAULT_LR = {"wire": 5e-3}
"""Learning rates of the WIRE repository; every other method uses 1e-3."""


def method_lr(network: NetworkConfig) -> float:
    """The INR's rate of an image fit with ``network`` unless --lr says otherwise."""
    return DEFAULT_LR.get(network.method, 1e-3)


OUTPUTS = ("comparison.png", "reconstruction.png", "curves.png", WEIGHTS_FILE, "metrics.json")
"""What a fit writes in its folder, ``metrics.json`` last."""
FIT_BYTES_PER_PIXEL, RENDER_BYTES_PER_PIXEL = 256, 80
"""Memory per pixel of an image fit besides its network's activations (data, outputs, figures), and of a render."""


def image_network() -> NetworkConfig:
    """The default network of an image fit: a 3 x 256 ReLU MLP on WIRE's PE bands, filtered."""
    return NetworkConfig(method="mlp", embedding=EmbeddingConfig(pe_bands="wire", filtered=True))


@dataclass
class ImageFitConfig:
    """How to fit an image: the network and the optimisation (defaults: the WIRE repository's image fitting)."""

    network: Annotated[NetworkConfig, Flat] = field(default_factory=image_network)
    """The coordinate network."""
    train: Annotated[TrainConfig, Flat] = field(default_factory=TrainConfig)
    """The optimisation."""
    passes: int = 2000
    """Passes over the image's pixels (each one optimizer step per batch)."""
    batch_size: int = 65536
    """Pixels per optimizer step: full batch up to this many, shuffled mini-batches beyond."""
    lpips: bool = True
    """Compute LPIPS (AlexNet's weights are downloaded once; skipped with a notice when offline)."""
    error_vmax: float = 0.1
    """Absolute error at the top of the error panel's colour scale."""

    def check(self) -> None:
        """Raise :class:`UsageError` for options that cannot work (before any data is read)."""
        self.network.check()
        self.train.check()
        check_fields(self, positive_int=("passes", "batch_size"), positive=("error_vmax",))


class PixelTask(FitTask):
    """The mean squared error of a batch of pixels (a shuffled pass over the image, ``batch_size`` at a time)."""

    def __init__(self, pixels: Float[Tensor, "H W C"], batch_size: int, seed: int, device: torch.device) -> None:
        self.coords = pixel_coordinates(*pixels.shape[:2]).to(device)
        self.target = pixels.reshape(-1, pixels.shape[2]).to(device)
        self.batch_size = min(batch_size, len(self.target))
        self.batches = math.ceil(len(self.target) / self.batch_size)
        self.generator = torch.Generator(device).manual_seed(seed)
        self.order = torch.arange(len(self.target), device=device)

    def loss(self, model: nn.Module, step: int) -> Tensor:
        batch = step % self.batches
        if batch == 0 and step > 0 and hasattr(model, "end_iteration"):  # SAPE reveals its frequencies
            model.end_iteration(step // self.batches - 1)
        if batch == 0 and self.batches > 1:
            self.order = torch.randperm(len(self.target), device=self.generator.device, generator=self.generator)
        index = self.order[batch * self.batch_size : (batch + 1) * self.batch_size] if self.batches > 1 else slice(None)
        squared = (model(self.coords[index]) - self.target[index]) ** 2
        if hasattr(model, "observe_error"):
            model.observe_error(squared.detach().mean(-1), self.coords[index])
        return squared.mean()

    def state_dict(self) -> dict:
        return {"generator": self.generator.get_state()}

    def load_state_dict(self, state: dict) -> None:
        self.generator.set_state(state["generator"])

    def describe(self, loss: float) -> str:
        return f"PSNR {psnr_from_mse(loss):6.2f} dB"


@torch.no_grad()
def render(network: nn.Module, height: int, width: int, chunk: int = 65536) -> Float[Tensor, "H W C"]:
    """The network's values on a ``height`` x ``width`` grid over the fitted image's [-1, 1] square."""
    device = next(network.parameters()).device
    coords = pixel_coordinates(height, width).to(device)
    values = torch.cat([network(coords[start : start + chunk]) for start in range(0, len(coords), chunk)])
    return values.reshape(height, width, -1).float().cpu()


def fit_image(
    pixels: Float[Tensor, "H W C"],
    name: str,
    config: ImageFitConfig,
    out: Path,
    progress: bool = True,
    overwrite: bool = False,
) -> dict:
    """Fit ``config.network`` to ``pixels`` and write :data:`OUTPUTS` into ``out``; returns the metrics. A stopped fit
    keeps its checkpoint; a diverged one writes its last finite state, marked ``diverged``, for the caller to raise."""
    check_pixels(pixels, name)
    height, width, channels = pixels.shape
    device = config.train.torch_device()
    with seeded(config.train.seed):
        model = build_network(config.network, 2, channels, sidelength=max(height, width)).to(device)
    if config.network.method in ("mlp", "sape"):
        warn_if_aliased(config.network.embedding, (width, height))
    per_sample, state = bytes_per_sample(model), TRAINING_BYTES_PER_PARAMETER * count_parameters(model)
    check_memory(
        "--batch-size",
        config.batch_size,
        lambda batch: state + FIT_BYTES_PER_PIXEL * height * width + per_sample * min(batch, height * width),
        device,
    )
    batches = math.ceil(height * width / min(config.batch_size, height * width))
    check_memory("--passes", config.passes, lambda passes: HISTORY_BYTES_PER_STEP * passes * batches, device)
    with claimed_folder(out, "--output-dir"):
        check_fit_folder(out, overwrite, OUTPUTS)
        return _fit(model, pixels, name, config, Path(out), progress)


def _fit(model: nn.Module, pixels: Tensor, name: str, config: ImageFitConfig, out: Path, progress: bool) -> dict:
    height, width, channels = pixels.shape
    device = next(model.parameters()).device
    if hasattr(model, "configure"):  # SAPE paces its progression over the run
        model.configure(config.passes)
    task = PixelTask(pixels.float(), config.batch_size, config.train.seed, device)
    # The INR's rate is scaled by the batch (WIRE repository); the filter's and the line search's bounds are not.
    train_config = config.train.with_rates(method_lr(config.network), min(1.0, config.batch_size / (height * width)))
    label = network_label(config.network)
    history = train(model, task, train_config, config.passes, checkpoint=out / CHECKPOINT_FILE,
                    settings=settings_key(asdict(config), content_digest(pixels)), description=f"{name} {label}",
                    progress=progress, steps_per_iter=task.batches)  # fmt: skip

    losses = torch.tensor(history.loss, dtype=torch.float64).reshape(-1, task.batches)
    sizes = torch.tensor([min(task.batch_size, height * width - b * task.batch_size) for b in range(task.batches)])
    psnrs = [psnr_from_mse(mse) for mse in (losses * sizes).sum(1).div(height * width).tolist()]
    reconstruction = render(model, height, width, config.batch_size)
    quality = image_metrics(reconstruction, pixels.float(), with_lpips=config.lpips)
    finite = [(p, i) for i, p in enumerate(psnrs) if not math.isnan(p)]
    best_psnr, best_pass = max(finite + [(quality["psnr"], len(psnrs))])
    counts = parameter_metrics(model)
    metrics = {
        "method": label, "image": name, "height": height, "width": width, "channels": channels,
        "passes": history.steps // task.batches, **quality, "best_psnr": best_psnr, "best_pass": best_pass, **counts,
        "parameters_per_value": counts["parameters"] / (height * width * channels), "inr_lr": train_config.lr,
        "device": str(device),
        "machine": machine_description(device), "config": asdict(config), "psnr_history": psnrs,
        **history.metrics(), **(model.summary() if hasattr(model, "summary") else {}),
    }  # fmt: skip
    save_image(reconstruction, out / "reconstruction.png")
    title = f"{name}: {label}, PSNR {quality['psnr']:.2f} dB" + (" (diverged)" if history.diverged else "")
    plot_comparison(pixels.float(), reconstruction, title, out / "comparison.png", config.error_vmax)
    plot_curves(metrics, out / "curves.png")
    write_torch(out / WEIGHTS_FILE, model.state_dict())
    write_json(out / "metrics.json", metrics)
    if not history.stopped:
        (out / CHECKPOINT_FILE).unlink(missing_ok=True)
    return metrics


def load_fit(folder: Path) -> tuple[nn.Module, dict]:
    """The network and metrics of the finished image fit in ``folder``."""

    def build(metrics: dict) -> nn.Module:
        network = config_from_dict(NetworkConfig, metrics["config"]["network"])
        return build_network(network, 2, metrics["channels"], sidelength=max(metrics["height"], metrics["width"]))

    return load_trained_network(folder, build, "rff-image fit")
