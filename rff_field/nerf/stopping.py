"""Ctrl-C during ``ns-train``: training stops after the step with a checkpoint, as at its end.

nerfstudio's own answer to Ctrl-C stops at once, prints a traceback and keeps only the checkpoints saved before
(every ``--steps-per-save`` steps), so up to that many steps are lost.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from typing import Optional

from nerfstudio.engine.callbacks import TrainingCallback, TrainingCallbackAttributes, TrainingCallbackLocation

PRESSED = "ctrl_c_pressed"
"""The trainer attribute set to True when Ctrl-C stopped it (its own ``stop_training`` has other causes too)."""


def ctrl_c_callback(attributes: TrainingCallbackAttributes) -> Optional[TrainingCallback]:
    """A callback that, before the first step, makes the first Ctrl-C end training after the step it falls in:
    the trainer then saves its checkpoint as at the end of training (``--load-dir`` goes on from it). A second
    Ctrl-C, or one after training ended, acts as usual; an ignored Ctrl-C stays ignored. None without a trainer, or
    outside the main thread.
    """
    trainer = attributes.trainer
    if trainer is None or threading.current_thread() is not threading.main_thread():
        return None
    previous: list = []

    def handler(signum, frame) -> None:
        signal.signal(signal.SIGINT, previous[0])  # a second Ctrl-C acts at once
        if trainer.training_state == "completed" or getattr(trainer, "stop_training", False):
            if callable(previous[0]):
                previous[0](signum, frame)
            else:
                raise KeyboardInterrupt
            return
        trainer.stop_training = True
        setattr(trainer, PRESSED, True)
        resume = " (ns-train with --load-dir goes on from it)" if os.path.basename(sys.argv[0]) == "ns-train" else ""
        print(
            f"Ctrl-C: training stops after this step and saves its checkpoint in {trainer.checkpoint_dir}{resume}; "
            "press Ctrl-C again to stop at once",
            file=sys.stderr,
            flush=True,
        )

    def install(step: int) -> None:
        if not previous:
            previous.append(signal.getsignal(signal.SIGINT))
            if previous[0] != signal.SIG_IGN:  # as a shell starts background jobs: it stays ignored
                signal.signal(signal.SIGINT, handler)

    return TrainingCallback(where_to_run=[TrainingCallbackLocation.BEFORE_TRAIN_ITERATION], func=install)
