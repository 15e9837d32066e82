"""Ctrl-C pressed at a chosen point of a fit, as a user would press it."""

from __future__ import annotations

import signal


def press_ctrl_c_on_call(monkeypatch, owner, name: str, at: int, signum: int = signal.SIGINT) -> None:
    """Make ``owner.name`` press Ctrl-C (SIGINT; or send ``signum``) on its ``at``-th call."""
    original, calls = getattr(owner, name), []

    def pressing(*args, **kwargs):
        calls.append(1)
        if len(calls) == at:
            signal.raise_signal(signum)
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, pressing)
