"""Stop a NeRF training whose loss or parameters become non-finite, before a non-finite checkpoint is written."""

from __future__ import annotations

import sys

import torch
from nerfstudio.engine.callbacks import TrainingCallback, TrainingCallbackAttributes, TrainingCallbackLocation
from nerfstudio.models.base_model import Model
from nerfstudio.utils.misc import step_check

from rff_field.core.divergence import divergence_message, nonfinite_counts
from rff_field.core.errors import TrainingDiverged


def divergence_callback(model: Model, attributes: TrainingCallbackAttributes) -> TrainingCallback:
    """A callback run after every training step: the loss is checked every step, the parameters at every step that
    saves a checkpoint (before the save). On a non-finite value it stops the trainer (no checkpoint of the
    non-finite state is written) and raises :class:`TrainingDiverged` saying at which step, what went non-finite,
    what to try and which checkpoint is the last finite one (``ns-train`` prints it as one line).

    Args:
        model: The model being trained; ``model.training_loss()`` returns the step's loss.
        attributes: The trainer's callback attributes (for its config and checkpoint folder).
    """
    trainer = attributes.trainer

    def check(step: int) -> None:
        loss = model.training_loss()
        loss_finite = loss is None or bool(torch.isfinite(loss.detach()).all())
        saves = trainer is not None and step_check(step, trainer.config.steps_per_save)
        if loss_finite and not saves:
            return
        counts = nonfinite_counts(model.get_param_groups())
        if loss_finite and not any(counts.values()):
            return
        if trainer is not None:
            trainer.shutdown()
        raise TrainingDiverged(message(step, None if loss_finite else float(loss), counts))

    def message(step: int, loss, counts) -> str:
        hints = []
        if trainer is not None:
            for name, group in trainer.config.optimizers.items():
                if name != "filter":
                    hints.append(f"a lower --optimizers.{name}.optimizer.lr (now {group['optimizer'].lr:g})")
        search = getattr(model.config, "line_search", None)
        if search is not None and search.enabled:
            hints.append(f"a lower --pipeline.model.line-search.lr-max (now {search.lr_max:g})")
        kept = "no checkpoint was written"
        if trainer is not None:
            saved = sorted(trainer.checkpoint_dir.glob("step-*.ckpt"))
            if saved:
                kept = f"the last checkpoint, {saved[-1]}, holds finite values"
        return divergence_message(step, loss, counts, hints or ["a lower learning rate"], kept)

    return TrainingCallback(where_to_run=[TrainingCallbackLocation.AFTER_TRAIN_ITERATION], func=check)


def report_divergence_in_one_line() -> None:
    """Make an uncaught :class:`TrainingDiverged` print as one line (for ``ns-train``, whose main we do not own)."""
    previous = sys.excepthook

    def hook(kind, value, traceback) -> None:
        if isinstance(value, TrainingDiverged):
            print(f"ns-train: {value}", file=sys.stderr)
        else:
            previous(kind, value, traceback)

    sys.excepthook = hook
