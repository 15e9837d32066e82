"""Ctrl-C pressed at a chosen point of a fit, as a user would press it."""

from __future__ import annotations

import signal


def press_ctrl_c_on_call(monkeypatch, owner, name: str, at: int) -> None:
    """Make ``owner.name`` press Ctrl-C (SIGINT) on its ``at``-th call."""
    original, calls = getattr(owner, name), []

    def pressing(*args, **kwargs):
        calls.append(1)
        if len(calls) == at:
            signal.raise_signal(signal.SIGINT)
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, pressing)
