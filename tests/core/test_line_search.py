"""The line search: the tensor rule against a plain transcription of it, and the hook in real training loops."""

import copy
import itertools
import logging
import math
import os
import socket
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import rff_field
from rff_field.core.embedding import EmbeddingConfig
from rff_field.core.errors import UsageError
from rff_field.core.filter import named_param_groups, split_filter_parameters
from rff_field.core.line_search import FilterLineSearch, LineSearchConfig, attach_line_search, filter_step_size
from rff_field.inr.mlp import FourierFeatureMLP
from tests.core.host_reads import HostReads

NAN, INF = math.nan, math.inf


def plain_rule(loss, d_a, lr_d_i, lr_min, lr_max, eps=1e-6):
    """docs/method.md's rule, transcribed on Python floats."""
    if not all(math.isfinite(v) for v in (loss, d_a, lr_d_i)):
        return lr_min
    k, b = -d_a + eps, loss + lr_d_i
    if k >= 0 and b <= 0:
        rate = lr_min
    elif (k >= 0 and b >= 0) or (k <= 0 and b <= 0):
        rate = lr_max if k == 0 else min(max(abs(b / k), lr_min), lr_max)
    else:
        rate = lr_min
    if rate * d_a + lr_d_i > 0 and d_a != 0:
        rate = -lr_d_i / d_a
    return min(max(rate, lr_min), lr_max)


# (loss, d_filter, lr_d_inr, lr_min, lr_max): each branch, then a grid that meets every boundary from both sides
BRANCHES = [
    (0.1, -1.0, -0.2, 0.0, 1e-3),  # k >= 0, b <= 0: the INR alone reaches zero
    (1e-3, -2.0, -5e-4, 0.0, 1e-3),  # the zero crossing inside the bounds
    (1.0, -1.0, 0.0, 0.0, 1e-3),  # above lr_max
    (1e-6, -1.0, 0.0, 1e-4, 1e-3),  # below lr_min
    (0.1, 0.5, -0.3, 0.0, 1.0),  # k <= 0, b <= 0
    (0.1, 0.5, 0.0, 2e-4, 1.0),  # k < 0, b > 0: uphill
    (0.5, 1e-6, 0.0, 1e-5, 0.3),  # k == 0
    (1e-9, 5e-7, -1e-12, 0.0, 1.0),  # sufficient decrease violated: its boundary value
    (1.0, -1.0, 0.5, 0.0, 0.1),  # ... clipped to lr_max
    (NAN, -1.0, -1.0, 0.0, 1e-3),
    (0.1, INF, -1.0, 1e-6, 1e-3),
    (0.1, -1.0, -INF, 0.0, 1e-3),
]
GRID = [(*v, 1e-5, 1.0) for v in itertools.product([0.0, 1e-9, 1.0], [-2.0, -1e-6, 0.0, 1e-6, 3.0], [-5.0, 0.0, 0.5])]


def test_the_tensor_rule_is_the_rule_on_every_branch():
    cases = torch.tensor(BRANCHES + GRID, dtype=torch.float64)
    for row in cases:  # the same float64 operations: equal, not close
        rate = filter_step_size(*row[:3], float(row[3]), float(row[4]), 1e-6)
        assert float(rate) == plain_rule(*row.tolist())
    batched = filter_step_size(*cases[:, :3].T, 1e-5, 1.0, 1e-6)  # elementwise
    assert batched[len(BRANCHES) :].tolist() == [plain_rule(*case) for case in GRID]


def make_problem(seed=0, width=16):
    torch.manual_seed(seed)
    encoding = EmbeddingConfig(num_frequencies=6, pe_scale=8.0, filter_layers=2).build(2)
    net = FourierFeatureMLP(encoding, 1, hidden_features=width, hidden_layers=1)
    x = torch.rand(64, 2) * 2 - 1
    return net, x, torch.sin(3 * x[:, :1]) * torch.cos(2 * x[:, 1:])


def reference_slopes(optimizers, filter_ids):
    """(d_filter, sum_g lr_g d_g) from twins of the optimizers stepped at rate 1: their parameters' moves."""
    d_filter, lr_d_inr = 0.0, 0.0
    for opt in optimizers:
        twins = {id(p): p.detach().clone().requires_grad_() for g in opt.param_groups for p in g["params"]}
        groups = [{**g, "params": [twins[id(p)] for p in g["params"]], "lr": 1.0} for g in opt.param_groups]
        twin = type(opt)(groups)
        twin.load_state_dict(copy.deepcopy(opt.state_dict()))  # load_state_dict keeps the tensors themselves
        for group, original in zip(twin.param_groups, opt.param_groups):
            group["lr"], group["foreach"] = 1.0, False
            for p, q in zip(group["params"], original["params"]):
                p.grad = None if q.grad is None else q.grad.clone()
        twin.step()
        for group, original in zip(twin.param_groups, opt.param_groups):
            for p, q in zip(group["params"], original["params"]):
                if q.grad is not None:
                    d = float((q.grad.double() * (p.detach().double() - q.detach().double())).sum())
                    if id(q) in filter_ids:
                        d_filter += d
                    else:
                        lr_d_inr += float(original["lr"]) * d
    return d_filter, lr_d_inr


def train(net, x, y, optimizers, steps, hook=None, each=None, scaler=None, clip=None):
    losses = []
    for _ in range(steps):
        for opt in optimizers:
            opt.zero_grad()
        loss = ((net(x) - y) ** 2).mean()
        step["loss"] = loss
        (scaler.scale(loss) if scaler else loss).backward()
        if clip:
            step["factor"] = min(1.0, clip / (hook.clip_grad_norm_(clip).item() + 1e-6))
        if each:
            each()
        for opt in optimizers:
            scaler.step(opt) if scaler else opt.step()
        if scaler:
            scaler.update()
        losses.append(loss.item())
    return losses


step = {}


@pytest.mark.numerics
@pytest.mark.parametrize("filter_first", [False, True])
@pytest.mark.parametrize("clip", [None, 0.05])
def test_the_hook_sets_the_rule_every_step_from_the_optimizers_own_steps(filter_first, clip):
    net, x, y = make_problem()
    filt, inr = split_filter_parameters(net)
    opt_inr = torch.optim.Adam(inr, lr=1e-2, amsgrad=True, weight_decay=1e-4)
    opt_filter = torch.optim.AdamW(filt, lr=123.0)  # the hook overwrites it
    optimizers = [opt_filter, opt_inr] if filter_first else [opt_inr, opt_filter]
    hook = FilterLineSearch(filt, inr, optimizers, lambda: step["loss"], LineSearchConfig(lr_max=1.0))
    expected = []

    def check():
        factor = 1.0 if clip is None else step["factor"]  # the slopes are the loss's own gradient's
        expected.append([step["loss"].item(), *(d / factor for d in reference_slopes(optimizers, set(map(id, filt))))])

    losses = train(net, x, y, optimizers, 60, hook, check, clip=clip)
    records = hook.records
    torch.testing.assert_close(records[:, :3], torch.tensor(expected, dtype=torch.float64), rtol=1e-4, atol=1e-10)
    assert records[:, 3].tolist() == [plain_rule(*row[:3], 0.0, 1.0) for row in records.tolist()]
    assert opt_filter.param_groups[0]["lr"] == records[-1, 3] and hook.record() == dict(
        zip(("loss", "d_filter", "lr_d_inr", "lr"), records[-1].tolist())
    )
    assert ((0 < records[:, 3]) & (records[:, 3] < 1)).any() and sum(losses[-5:]) < 0.3 * sum(losses[:5])


def test_the_gradient_direction_with_sgd():
    net, x, y = make_problem(1)
    filt, inr = split_filter_parameters(net)
    opt = torch.optim.SGD([{"params": inr, "lr": 0.05}, {"params": filt, "lr": 0.0}])
    hook = FilterLineSearch(filt, None, opt, lambda: step["loss"], LineSearchConfig(direction="gradient", lr_max=0.5))
    slopes = []
    train(net, x, y, [opt], 5, each=lambda: slopes.append(reference_slopes([opt], set(map(id, filt)))))
    torch.testing.assert_close(hook.records[:, 1:3], torch.tensor(slopes, dtype=torch.float64), rtol=1e-5, atol=0)


@pytest.mark.numerics
def test_a_grad_scaler_gives_the_rates_of_the_unscaled_gradients():
    rates = []
    for enabled, fused in ((False, False), (True, False), (True, True)):  # a fused Adam unscales in its kernel
        net, x, y = make_problem(2)
        filt, inr = split_filter_parameters(net)
        opts = [torch.optim.Adam(inr, lr=1e-2, fused=fused), torch.optim.Adam(filt, fused=fused)]
        scaler = torch.amp.GradScaler("cpu", init_scale=2.0**12, enabled=enabled)
        hook = FilterLineSearch(filt, inr, opts, lambda: step["loss"], LineSearchConfig(lr_max=1.0), scaler)
        train(net, x, y, opts, 10, scaler=scaler)
        rates.append(hook.records)
    torch.testing.assert_close(rates[1], rates[0], rtol=1e-6, atol=0)
    torch.testing.assert_close(rates[2], rates[0], rtol=1e-4, atol=0)  # fused Adam: other roundings


def test_after_loading_the_optimizer_state_the_hook_still_sets_the_rate():
    net, x, y = make_problem(3)
    opt = torch.optim.Adam(named_param_groups(net, 1e-2, 1e-3))
    hook = attach_line_search(LineSearchConfig(lr_max=1.0), opt, lambda: step["loss"])
    train(net, x, y, [opt], 3)
    opt.load_state_dict(opt.state_dict())
    train(net, x, y, [opt], 2)
    assert len(hook.records) == 5 and opt.param_groups[1]["lr"] == hook.records[-1, 3]
    hook.remove()
    assert isinstance(opt.param_groups[1]["lr"], float)
    train(net, x, y, [opt], 1)
    assert len(hook.records) == 5


def test_after_the_first_step_the_hook_reads_nothing_on_the_host():
    net, x, y = make_problem(4)
    filt, inr = split_filter_parameters(net)
    opt = torch.optim.Adam([{"params": inr, "lr": 1e-2}, {"params": filt}])
    FilterLineSearch(filt, inr, opt, lambda: step["loss"])
    train(net, x, y, [opt], 1)  # the one read: is the loss negative?
    with HostReads(package=Path(rff_field.__file__).parent) as mode:
        train(net, x, y, [opt], 2)
    assert mode.reads == []


def no_compiler(*args):
    raise RuntimeError("Failed to find C compiler")


def test_a_fused_line_search_that_cannot_compile_says_so_and_runs_unfused(caplog):
    rates = []
    for fused in (False, True):
        net, x, y = make_problem(5)
        opt = torch.optim.Adam(named_param_groups(net, 1e-2, 1e-3))
        hook = attach_line_search(LineSearchConfig(lr_max=1.0, fused=fused), opt, lambda: step["loss"])
        if fused:
            hook._compiled_row = no_compiler
        with caplog.at_level(logging.WARNING):
            train(net, x, y, [opt], 4)
        rates.append(hook.records)
        assert not hook.compiled
    assert "could not be compiled" in caplog.text and torch.equal(rates[0], rates[1])


@pytest.mark.slow
@pytest.mark.numerics
def test_the_fused_line_search_compiles_once_and_gives_the_unfused_rates():
    rates = []
    for fused in (False, True):
        net, x, y = make_problem(6)
        opt = torch.optim.Adam(named_param_groups(net, 1e-2, 1e-3))
        hook = attach_line_search(LineSearchConfig(lr_max=1.0, fused=fused), opt, lambda: step["loss"])
        train(net, x, y, [opt], 6)
        rates.append(hook.records)
        assert hook.compiled == fused
    torch.testing.assert_close(rates[1], rates[0], rtol=1e-6, atol=1e-12)  # float32 sums in another order


def _ddp_worker(rank, port, out):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    net, x, y = make_problem()
    ddp = torch.nn.parallel.DistributedDataParallel(net)
    opt = torch.optim.Adam(named_param_groups(net, 1e-2, 1e-3))
    hook = attach_line_search(LineSearchConfig(lr_max=1.0), opt, lambda: step["loss"])
    losses = train(ddp, x + 0.1 * rank, y * (1 + rank), [opt], 4)  # each process sees other data
    torch.save({"records": hook.records, "losses": losses}, f"{out}/{rank}.pt")
    dist.barrier()
    dist.destroy_process_group()


def test_in_a_process_group_the_hook_averages_the_loss_over_it():
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        net, x, y = make_problem(7)
        opt = torch.optim.Adam(named_param_groups(net, 1e-2, 1e-3))
        hook = attach_line_search(LineSearchConfig(lr_max=1.0), opt, lambda: step["loss"])
        losses = train(torch.nn.parallel.DistributedDataParallel(net), x, y, [opt], 3)
        assert hook.records[:, 0].tolist() == pytest.approx(losses, rel=1e-7)
    finally:
        dist.destroy_process_group()


@pytest.mark.slow  # two processes start
def test_under_ddp_every_process_sets_the_rate_of_the_averaged_loss(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(_ddp_worker, args=(port, str(tmp_path)), nprocs=2)
    runs = [torch.load(tmp_path / f"{rank}.pt") for rank in (0, 1)]
    assert torch.equal(runs[0]["records"], runs[1]["records"])
    mean = [(a + b) / 2 for a, b in zip(runs[0]["losses"], runs[1]["losses"])]
    assert runs[0]["records"][:, 0].tolist() == pytest.approx(mean, rel=1e-6)


def test_misuse_is_refused_with_a_usage_error():
    net, x, y = make_problem()
    filt, inr = split_filter_parameters(net)
    loss_fn = lambda: step["loss"]  # noqa: E731
    with pytest.raises(UsageError):  # the filter shares a group
        FilterLineSearch(filt, inr, torch.optim.Adam(net.parameters()), loss_fn)
    with pytest.raises(UsageError):  # Adam's direction from SGD
        FilterLineSearch(filt, inr, torch.optim.SGD([{"params": inr}, {"params": filt}], lr=0.1), loss_fn)
    with pytest.raises(UsageError):  # parameters no optimizer holds
        FilterLineSearch(filt, inr, torch.optim.Adam(inr), loss_fn)
    with pytest.raises(UsageError):  # no name to find the filter's group by
        attach_line_search(LineSearchConfig(), torch.optim.Adam([{"params": inr}, {"params": filt}]), loss_fn)
    assert attach_line_search(LineSearchConfig(enabled=False), torch.optim.Adam(inr), loss_fn) is None
    for loss in (torch.ones(3), -torch.ones(())):  # not a scalar; below zero
        opt = torch.optim.Adam(named_param_groups(net, 1e-2, 1e-3))
        attach_line_search(LineSearchConfig(), opt, lambda loss=loss: loss)
        ((net(x) - y) ** 2).mean().backward()
        with pytest.raises(UsageError):
            opt.step()
        with pytest.raises(UsageError):  # a closure
            opt.step(lambda loss=loss: loss)


@pytest.mark.parametrize(
    "field,value",
    [("lr_max", -1.0), ("lr_min", 2e-3), ("eps", NAN), ("direction", "newton")],
)
def test_bad_options_name_the_option(field, value):
    with pytest.raises(UsageError, match=f"--pipeline.model.line-search.{field.replace('_', '-')}"):
        LineSearchConfig(**{field: value}).check("--pipeline.model.line-search.")
