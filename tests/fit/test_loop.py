"""The fit loop: a fit stopped by a signal resumes bit-identically; divergence keeps the last finite state."""

import signal
from dataclasses import replace

import pytest
import torch

from rff_field.core.embedding import EmbeddingConfig
from rff_field.core.errors import UsageError
from rff_field.fit.loop import FitInterrupted, FitTask, TrainConfig, train
from rff_field.inr.config import NetworkConfig, build_network

CONFIG = TrainConfig(log_every=4, device="cpu").with_rates(1e-3)
STEPS = 12


class Waves(FitTask):
    """Random mini-batches of a 2D signal (the batches depend on the generator's state, which a resume restores);
    on step ``signal_at`` it sends ``signum`` to this process, from step ``nan_from`` its loss is NaN."""

    def __init__(self, signal_at=None, signum=signal.SIGINT, nan_from=None):
        self.generator = torch.Generator().manual_seed(0)
        self.points = torch.rand(128, 2, generator=torch.Generator().manual_seed(1)) * 2 - 1
        self.values = torch.sin(4 * self.points).prod(-1, keepdim=True)
        self.signal_at, self.signum, self.nan_from = signal_at, signum, nan_from

    def loss(self, model, step):
        if step == self.signal_at:
            signal.raise_signal(self.signum)
        index = torch.randint(0, 128, (32,), generator=self.generator)
        loss = ((model(self.points[index]) - self.values[index]) ** 2).mean()
        return loss * float("nan") if self.nan_from is not None and step >= self.nan_from else loss

    def state_dict(self):
        return {"generator": self.generator.get_state()}

    def load_state_dict(self, state):
        self.generator.set_state(state["generator"])


def network():
    torch.manual_seed(0)
    return build_network(NetworkConfig(hidden_features=16, embedding=EmbeddingConfig(num_frequencies=4)), 2, 1)


def weights(model):
    return [value.clone() for value in model.state_dict().values()]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_ends_the_step_saves_and_the_fit_resumes_bit_identically(signum, tmp_path):
    whole = network()
    reference = train(whole, Waves(), CONFIG, STEPS, progress=False)
    assert reference.line_search is not None  # the filter's rate comes from the line search: its state is resumed too
    checkpoint, handlers = tmp_path / "checkpoint.pt", [signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)]
    with pytest.raises(FitInterrupted, match=r"after step 6 of 12.*checkpoint\.pt"):
        train(network(), Waves(signal_at=5, signum=signum), CONFIG, STEPS, checkpoint, progress=False)
    assert [signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)] == handlers
    resumed_model = network()
    resumed = train(resumed_model, Waves(), CONFIG, STEPS, checkpoint, progress=False)
    assert resumed.resumed_at == [6] and resumed.loss == reference.loss and resumed.filter_lr == reference.filter_lr
    assert all(torch.equal(a, b) for a, b in zip(weights(resumed_model), weights(whole)))
    with pytest.raises(UsageError, match="other settings"):
        train(network(), Waves(), CONFIG, STEPS, checkpoint, settings="another image", progress=False)


def test_the_time_budget_stops_with_a_checkpoint_the_same_call_goes_on_from(tmp_path):
    checkpoint = tmp_path / "checkpoint.pt"
    stopped = train(network(), Waves(), replace(CONFIG, time_budget=1e-9), STEPS, checkpoint, progress=False)
    assert stopped.stopped and stopped.steps == 4 and checkpoint.is_file()
    assert train(network(), Waves(), CONFIG, STEPS, checkpoint, progress=False).resumed_at == [4]


def test_divergence_keeps_the_last_finite_state():
    diverging = network()
    history = train(diverging, Waves(nan_from=6), CONFIG, STEPS, progress=False)
    assert history.diverged.startswith("training diverged at step 6") and history.steps == 4
    assert len(history.loss) == 4 and len(history.filter_lr) == 4
    stopped_after_4 = network()  # the same fit stopped after 4 steps by its time budget
    train(stopped_after_4, Waves(), replace(CONFIG, time_budget=1e-9), STEPS, progress=False)
    assert all(torch.equal(a, b) for a, b in zip(weights(diverging), weights(stopped_after_4)))
    assert all(torch.isfinite(w).all() for w in weights(diverging))
