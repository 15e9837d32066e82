"""A training step replayed as a CUDA graph.

A small network's step on a GPU is bound by kernel launches, not arithmetic: every operation of the forward and
backward passes, of Adam and of the line search's scalar work is one launch from Python. Captured once in a CUDA
graph, the step's kernels are launched together at every replay.
"""

from __future__ import annotations

from typing import Callable, Optional

import torch
from torch import Tensor


class GraphedStep:
    """Calls ``step`` eagerly for its first ``warmup`` calls (on a side stream, as capture needs: the optimizer's
    state exists afterwards), captures the next call in a CUDA graph and replays the graph for that call and every
    later one. Each call is one step either way.

    ``step`` must read its inputs from tensors whose storage stays (copy each step's data into them), set any
    learning rate as a tensor that is updated in place, and read nothing on the host. It returns a tensor, the
    same one at every replay (rewritten in place). Where ``enabled`` is False every call is eager.
    """

    def __init__(self, step: Callable[[], Tensor], enabled: bool, warmup: int = 3) -> None:
        self.step = step
        self.enabled = enabled
        self.warmup = warmup
        self.calls = 0
        self.graph: Optional[torch.cuda.CUDAGraph] = None
        self.side: Optional[torch.cuda.Stream] = None
        self.output: Optional[Tensor] = None

    def __call__(self) -> Tensor:
        if not self.enabled:
            return self.step()
        if self.graph is None and self.calls < self.warmup:
            self.calls += 1
            self.side = self.side or torch.cuda.Stream()
            self.side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(self.side):
                output = self.step()
            torch.cuda.current_stream().wait_stream(self.side)
            return output
        if self.graph is None:
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self.output = self.step()
        self.graph.replay()
        return self.output
