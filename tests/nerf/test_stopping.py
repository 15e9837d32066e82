"""Ctrl-C during NeRF training (a stub trainer): the first press stops after the step, later ones act as before."""

from __future__ import annotations

import signal
import sys
import threading
from types import SimpleNamespace

import pytest

from rff_field.nerf import stopping


def installed_handler(trainer, previous) -> None:
    """Set ``previous`` as the SIGINT handler, then run the callback's install as the trainer does before step 0."""
    signal.signal(signal.SIGINT, previous)
    callback = stopping.ctrl_c_callback(SimpleNamespace(trainer=trainer))
    callback.run_callback(0)
    callback.run_callback(1)  # installed once: the handler it restores is still ``previous``


@pytest.fixture
def trainer():
    before = signal.getsignal(signal.SIGINT)
    yield SimpleNamespace(training_state="training", stop_training=False, checkpoint_dir="runs/x/nerfstudio_models")
    signal.signal(signal.SIGINT, before)


def test_no_callback_without_a_trainer_or_outside_the_main_thread(trainer):
    assert stopping.ctrl_c_callback(SimpleNamespace(trainer=None)) is None
    found = []
    worker = threading.Thread(target=lambda: found.append(stopping.ctrl_c_callback(SimpleNamespace(trainer=trainer))))
    worker.start()
    worker.join()
    assert found == [None]


@pytest.mark.parametrize("program", ["ns-train", "rff-demo"])
def test_the_first_press_stops_after_the_step_and_the_second_acts_at_once(trainer, monkeypatch, capsys, program):
    monkeypatch.setattr(sys, "argv", [f"/some/bin/{program}"])
    installed_handler(trainer, signal.default_int_handler)
    signal.raise_signal(signal.SIGINT)
    assert trainer.stop_training and getattr(trainer, stopping.PRESSED)
    notice = capsys.readouterr().err
    assert "training stops after this step and saves its checkpoint in runs/x/nerfstudio_models" in notice
    assert ("--load-dir" in notice) == (program == "ns-train")
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    with pytest.raises(KeyboardInterrupt):
        signal.raise_signal(signal.SIGINT)


def test_after_training_a_press_goes_to_the_handler_found_before(trainer):
    calls = []
    installed_handler(trainer, lambda signum, frame: calls.append(signum))
    trainer.training_state = "completed"
    signal.raise_signal(signal.SIGINT)
    assert calls == [signal.SIGINT] and not trainer.stop_training


def test_after_training_a_press_interrupts_when_the_handler_found_was_the_default(trainer):
    installed_handler(trainer, signal.SIG_DFL)
    trainer.stop_training = True  # stopped for another reason: the press is not taken as a request to stop
    with pytest.raises(KeyboardInterrupt):
        signal.raise_signal(signal.SIGINT)
    assert not hasattr(trainer, stopping.PRESSED)


def test_a_press_ignored_from_the_start_stays_ignored(trainer):
    installed_handler(trainer, signal.SIG_IGN)  # as a shell starts its background jobs
    assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    signal.raise_signal(signal.SIGINT)
    assert not trainer.stop_training
