"""What went non-finite when training diverged, in one line a user can act on."""

from __future__ import annotations

import math
from typing import Iterable, Mapping, Optional, Sequence

import torch
from torch import Tensor, nn

from rff_field.core.errors import TrainingDiverged
from rff_field.core.line_search import LineSearchConfig


@torch.no_grad()
def nonfinite_counts(groups: Mapping[str, Iterable[Tensor]]) -> dict[str, int]:
    """Non-finite values per parameter group (one host synchronisation for all of them)."""
    groups = {name: list(params) for name, params in groups.items()}
    device = next((params[0].device for params in groups.values() if params), torch.device("cpu"))
    zero = torch.zeros((), dtype=torch.long, device=device)
    counts = [sum(((~torch.isfinite(p)).sum().to(device) for p in params), zero) for params in groups.values()]
    return dict(zip(groups, map(int, torch.stack(counts).tolist()))) if counts else {}


def divergence_hints(
    lr: float, filter_lr: Optional[float], line_search: LineSearchConfig, lr_final: Optional[float] = None
) -> list[str]:
    """What to lower when a fit diverges: ``--lr`` (and ``--lr-final``), and for a filter its rate or rate bound."""
    hints = [f"a lower --lr (now {lr:g})" + (f" and --lr-final (now {lr_final:g})" if lr_final is not None else "")]
    if filter_lr is not None and line_search.enabled:
        hints.append(f"a lower --line-search.lr-max (now {line_search.lr_max:g})")
    elif filter_lr is not None:
        hints.append(f"a lower --filter-lr (now {filter_lr:g})")
    return hints


def divergence_message(step: int, loss: Optional[float], counts: Mapping[str, int], hints: Sequence[str], kept: str,
                       first_loss: Optional[float] = None) -> str:  # fmt: skip
    """``training diverged at step N: <what>; try <hints>; <kept>``; ``counts``: non-finite values per parameter
    group; ``first_loss``: the first step's, for a finite ``loss`` that blew up beyond it."""
    what = []
    if loss is not None and math.isfinite(loss) and first_loss is not None:
        what.append(f"the loss rose to {loss:.3g}, {loss / first_loss:.2g} times its first value ({first_loss:.3g})")
    elif loss is not None:
        what.append(f"the loss is {loss}")
    bad = [f"{count:,} {name} parameters" for name, count in counts.items() if count]
    what += [" and ".join(bad) + " are not finite"] if bad else []
    return (
        f"training diverged at step {step}: {'; '.join(what) or 'non-finite values'}; try {' or '.join(hints)}; {kept}"
    )


# A loss this many times the first step's counts as diverged: a network whose outputs left the target's range
# by orders of magnitude does not come back, and a finite loss would otherwise hide it until the end.
BLOWUP_FACTOR = 1e4


class LastFiniteState:
    """Checks a training now and then, keeping a copy of the model at the last sound check (finite, losses at most
    ``blowup`` times the first) that it restores before raising :class:`TrainingDiverged` with ``hints``."""

    def __init__(self, model: nn.Module, groups: Mapping[str, Sequence[Tensor]], hints: Sequence[str],
                 blowup: float = BLOWUP_FACTOR) -> None:  # fmt: skip
        self.model, self.groups, self.hints, self.blowup = model, groups, hints, blowup
        self.first_loss: Optional[Tensor] = None  # on the device
        self.diverged_at: Optional[int] = None
        self.step = 0  # of the copy in self.state
        self.state = self._copy()  # the copy of step `step`; the initial model when nothing finite was seen yet
        self._unseen_step, self._unseen_state = 0, self.state  # copied at the last check, its loss not yet seen

    def resume(self, step: int, first_loss: Optional[Tensor]) -> None:
        """Go on from the model as restored at ``step`` from a sound state (``first_loss``: that training's first)."""
        self.step = self._unseen_step = step
        self.state = self._unseen_state = self._copy()
        self.first_loss = first_loss

    def _copy(self) -> dict[str, Tensor]:
        return {key: value.detach().clone() for key, value in self.model.state_dict().items()}

    @torch.no_grad()
    def check(self, step: int, losses: Tensor) -> None:
        """Raise :class:`TrainingDiverged` (restoring the model) for a non-finite parameter or loss or a blown-up loss;
        ``losses``: those of steps ``step - len(losses)`` .. ``step - 1``."""
        if self.first_loss is None and len(losses):
            self.first_loss = losses[0].clone()
        sound = torch.isfinite(losses)
        if self.first_loss is not None:  # a first loss of 0 sets no ceiling
            sound &= (losses <= self.first_loss * self.blowup) | (self.first_loss <= 0)
        counts = nonfinite_counts(self.groups)
        bad = (~sound).nonzero()
        if len(losses) and (not len(bad) or int(bad[0]) > 0):
            self.step, self.state = self._unseen_step, self._unseen_state  # the loss it gave, losses[0], is finite
        if not len(bad) and not any(counts.values()):
            self._unseen_step, self._unseen_state = step, self._copy()
            return
        first = step - len(losses) + (int(bad[0]) if len(bad) else len(losses) - 1)
        self.diverged_at = first if self.diverged_at is None else min(self.diverged_at, first)
        loss = float(losses[int(bad[0])]) if len(bad) else None
        self.model.load_state_dict(self.state)
        kept = f"the model of step {self.step}, the last sound one, was kept"
        first_loss = float(self.first_loss) if self.first_loss is not None else None
        raise TrainingDiverged(divergence_message(first, loss, counts, self.hints, kept, first_loss))
