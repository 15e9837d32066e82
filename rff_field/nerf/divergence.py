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
    """A callback run after every training step. Each step's loss is checked on the device (no host read); the
    result is read where nerfstudio logs its scalars anyway (``--logging.steps-per-log``) and, with the parameters,
    before every checkpoint and at the last step. On a non-finite value it stops the trainer (no checkpoint of the
    non-finite state is written) and raises :class:`TrainingDiverged` saying at which step, what went non-finite,
    what to try and which checkpoint is the last finite one (``ns-train`` prints it as one line).

    Args:
        model: The model being trained; ``model.training_loss()`` returns the step's loss.
        attributes: The trainer's callback attributes (for its config and checkpoint folder).
    """
    trainer = attributes.trainer
    first_bad: dict = {}  # device tensors: the first step with a non-finite loss (-1: none), its loss

    def check(step: int) -> None:
        loss = model.training_loss()
        if loss is not None:
            loss = loss.detach().reshape(())
            if not first_bad:
                first_bad["step"] = torch.full((), -1, dtype=torch.long, device=loss.device)
                first_bad["loss"] = torch.zeros((), dtype=loss.dtype, device=loss.device)
            new = (first_bad["step"] < 0) & ~torch.isfinite(loss)
            first_bad["step"] = torch.where(new, step, first_bad["step"])
            first_bad["loss"] = torch.where(new, loss, first_bad["loss"])
        # nerfstudio saves a checkpoint at these steps and after the last one
        saves = trainer is not None and (
            step_check(step, trainer.config.steps_per_save)
            or step + 1 >= getattr(trainer, "_start_step", 0) + trainer.config.max_num_iterations  # a resumed run too
            or getattr(trainer, "stop_training", False)  # Ctrl-C: it saves after this step (set in train())
        )
        logs = trainer is None or step_check(step, max(trainer.config.logging.steps_per_log, 1))
        if not (saves or logs):
            return
        bad_step = int(first_bad["step"]) if first_bad else -1  # one host read
        counts = nonfinite_counts(model.get_param_groups()) if saves or bad_step >= 0 else {}
        if bad_step < 0 and not any(counts.values()):
            return
        if trainer is not None:
            trainer.shutdown()
        loss_value = float(first_bad["loss"]) if bad_step >= 0 else None
        raise TrainingDiverged(message(bad_step if bad_step >= 0 else step, loss_value, counts))

    def message(step: int, loss, counts) -> str:
        hints = []
        search = getattr(model.config, "line_search", None)
        searching = search is not None and search.enabled
        if trainer is not None:
            for name, group in trainer.config.optimizers.items():
                if name != "filter" or not searching:  # the line search sets the filter's rate
                    option = f"--optimizers.{name.replace('_', '-')}.optimizer.lr"
                    hints.append(f"a lower {option} (now {group['optimizer'].lr:g})")
        if searching:
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
