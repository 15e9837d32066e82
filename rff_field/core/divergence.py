"""What went non-finite when training diverged, in one line a user can act on."""

from __future__ import annotations

from typing import Iterable, Mapping, Optional, Sequence

import torch
from torch import Tensor


@torch.no_grad()
def nonfinite_counts(groups: Mapping[str, Iterable[Tensor]]) -> dict[str, int]:
    """Non-finite values per parameter group (one host synchronisation for all of them)."""
    counts = {
        name: torch.stack([(~torch.isfinite(p)).sum() for p in params]).sum() if params else torch.zeros(())
        for name, params in ((name, list(params)) for name, params in groups.items())
    }
    return dict(zip(counts, torch.stack(list(counts.values())).tolist())) if counts else {}


def divergence_message(
    step: int,
    loss: Optional[float],
    counts: Mapping[str, int],
    hints: Sequence[str],
    kept: str,
) -> str:
    """``training diverged at step N: <what>; try <hints>; <what was kept>``.

    Args:
        step: The step at which the loss or a parameter was first seen non-finite.
        loss: That step's loss (None when it was finite or unknown).
        counts: Non-finite values per parameter group (e.g. ``{"filter": 0, "field": 12}``).
        hints: What to try, each a short clause naming an option and its value.
        kept: What the user keeps (e.g. the last finite checkpoint).
    """
    what = [f"the loss is {loss}"] if loss is not None else []
    bad = [f"{count:,} {name} parameters" for name, count in counts.items() if count]
    if bad:
        what.append(" and ".join(bad) + " are not finite")
    found = "; ".join(what) or "non-finite values"
    return f"training diverged at step {step}: {found}; try {' or '.join(hints)}; {kept}"
