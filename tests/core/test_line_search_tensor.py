"""The line search without host synchronisation: the tensor rule is the rule, the hook sets the rates that the
earlier implementation (flattened copies of every parameter, rule on host floats) set, and it reads no tensor on
the host."""

from __future__ import annotations

import itertools
import logging
import math
import warnings

import pytest
import torch

from rff_field.core.encodings import PositionalEncoding
from rff_field.core.filter import FilteredEncoding, split_filter_parameters
from rff_field.core.line_search import FilterLineSearch
from rff_field.core.step_rule import (
    balanced_step_size,
    balanced_step_size_tensor,
    filter_step_size,
    filter_step_size_tensor,
)
from rff_field.inr.mlp import FourierFeatureMLP
from tests.core.test_line_search_hook import make_problem
from tests.host_reads import HostReads

NAN, INF = math.nan, math.inf

# (loss, d_filter, d_inr, lr_inr, lr_min, lr_max): every branch of docs/method.md's rule
BRANCH_CASES = [
    (0.1, -1.0, -1.0, 0.2, 0.0, 1e-3),  # k >= 0, b <= 0: the INR alone reaches zero
    (0.1, -1.0, -1.0, 0.2, 1e-5, 1e-3),
    (1e-3, -2.0, -0.5, 1e-3, 0.0, 1e-3),  # zero crossing inside the bounds
    (1.0, -1.0, 0.0, 0.0, 0.0, 1e-3),  # clipped at lr_max
    (1.0, -1.0, 0.0, 0.0, 0.0, 0.5),
    (1e-6, -1.0, 0.0, 0.0, 1e-4, 1e-3),  # clipped at lr_min
    (0.1, 0.5, -3.0, 0.1, 0.0, 1.0),  # k <= 0, b <= 0: |b / k|
    (0.1, 0.5, 0.0, 0.0, 0.0, 1.0),  # k < 0, b > 0: uphill
    (0.1, 0.5, 0.0, 0.0, 2e-4, 1.0),
    (0.5, 1e-6, 0.0, 0.0, 0.0, 0.3),  # k == 0, then the Armijo check
    (0.5, 1e-6, 0.0, 0.0, 1e-5, 0.3),
    (1.0, -1.0, 0.5, 1.0, 0.0, 10.0),  # Armijo holds
    (1e-9, 5e-7, -1e-12, 1.0, 0.0, 1.0),  # Armijo violated: moved to the boundary value
    (1.0, -1.0, 0.5, 1.0, 0.0, 0.1),  # Armijo correction clipped
    (0.0, 0.0, 0.0, 0.0, 0.0, 1e-3),
    (NAN, -1.0, -1.0, 1e-3, 0.0, 1e-3),  # non-finite inputs
    (0.1, INF, -1.0, 1e-3, 1e-6, 1e-3),
    (0.1, -1.0, -INF, 1e-3, 0.0, 1e-3),
    (0.1, -1.0, -1.0, NAN, 1e-6, 1e-3),
    (INF, -INF, INF, INF, 0.0, 1e-3),
]
# a grid over signs and magnitudes, so that every branch boundary is met from both sides
GRID = list(itertools.product([0.0, 1e-9, 1.0], [-2.0, -1e-6, 0.0, 1e-6, 3.0], [-5.0, 0.0, 0.5], [0.0, 1e-3, 1.0]))


def test_tensor_rule_is_the_rule_on_every_branch():
    # Both evaluate the same float64 operations in the same order, so the rates are equal, not just close.
    for loss, d_a, d_i, lr_i, lr_min, lr_max in BRANCH_CASES:
        expected = filter_step_size(loss, d_a, d_i, lr_i, lr_min=lr_min, lr_max=lr_max)
        assert filter_step_size_tensor(loss, d_a, d_i, lr_i, lr_min=lr_min, lr_max=lr_max).item() == expected
    for lr_min, lr_max in ((0.0, 1e-3), (1e-4, 2.0)):
        inputs = torch.tensor(GRID, dtype=torch.float64).T
        rates = filter_step_size_tensor(*inputs, lr_min=lr_min, lr_max=lr_max)  # one rate per row: vectorised
        assert rates.tolist() == [filter_step_size(*row, lr_min=lr_min, lr_max=lr_max) for row in GRID]
        # with Armijo's constant and epsilon changed, the correction and k == 0 move
        rates = filter_step_size_tensor(*inputs, lr_min=lr_min, lr_max=lr_max, eps=1.0, c1=0.5)
        assert rates.tolist() == [filter_step_size(*r, lr_min=lr_min, lr_max=lr_max, eps=1.0, c1=0.5) for r in GRID]


def test_tensor_balance_rule_is_the_balance_rule():
    rows = [row[1:] for row in GRID] + [(NAN, -1.0, 1e-3), (-0.1, INF, 1e-3), (-0.05, -2e-3, 1e-3)]
    inputs = torch.tensor(rows, dtype=torch.float64).T
    for lr_min, lr_max in ((0.0, 1e-3), (1e-6, 1.0)):
        rates = balanced_step_size_tensor(*inputs, lr_min=lr_min, lr_max=lr_max)
        assert rates.tolist() == [balanced_step_size(*row, lr_min=lr_min, lr_max=lr_max) for row in rows]


# ---------------------------------------------------------------------------------------------------------------
# The implementation this one replaced, kept as the reference: flattened copies of each group, Adam's direction
# recomputed on them, the rule applied to host floats.


def reference_adam_direction(optimizer, group, param, grad, state):
    beta1, beta2 = group["betas"]
    if group.get("maximize", False):
        grad = -grad
    decoupled = isinstance(optimizer, torch.optim.AdamW) or group.get("decoupled_weight_decay", False)
    weight_decay = group.get("weight_decay", 0.0)
    g = grad + weight_decay * param if (weight_decay and not decoupled) else grad
    step = float(state["step"]) + 1 if "step" in state else 1.0
    exp_avg = state["exp_avg"] * beta1 + (1 - beta1) * g if "exp_avg" in state else (1 - beta1) * g
    exp_avg_sq = state["exp_avg_sq"] * beta2 + (1 - beta2) * g * g if "exp_avg_sq" in state else (1 - beta2) * g * g
    if group.get("amsgrad", False) and "max_exp_avg_sq" in state:
        exp_avg_sq = torch.maximum(state["max_exp_avg_sq"], exp_avg_sq)
    m_hat = exp_avg / (1 - beta1**step)
    v_hat = exp_avg_sq / (1 - beta2**step)
    direction = -m_hat / (v_hat.sqrt() + group["eps"])
    if weight_decay and decoupled:
        direction = direction - weight_decay * param
    if group.get("maximize", False):
        direction = -direction
    return direction


def reference_group_slope(optimizer, group, direction, unscale=1.0):
    """The group's slope sum(g * d) and the sum of its terms' magnitudes sum(|g * d|)."""
    params = [p for p in group["params"] if p.grad is not None]
    grad = torch.cat([p.grad.reshape(-1).float() for p in params]) * unscale
    if direction == "gradient":
        squares = (grad * grad).sum(dtype=torch.float64)
        return float(-squares), float(squares)
    total, magnitude = 0.0, 0.0
    for p in params:  # per parameter: the reference's path for parameters at different steps, valid for all
        g = p.grad.float() * unscale
        d = reference_adam_direction(optimizer, group, p.detach().float(), g, optimizer.state.get(p, {}))
        total += float((g * d).sum(dtype=torch.float64))
        magnitude += float((g * d).abs().sum(dtype=torch.float64))
    return total, magnitude


def reference_record(filter_groups, inr_groups, loss, direction, lr_max, unscale=1.0):
    """(loss, d_filter, lr_d_inr, rate) as the reference computed them, and the magnitudes of the terms summed into
    each (0 for the loss and the rate)."""
    filters = [reference_group_slope(o, g, direction, unscale) for o, g in filter_groups]
    inrs = [[value * g["lr"] for value in reference_group_slope(o, g, direction, unscale)] for o, g in inr_groups]
    (d_filter, filter_terms), (lr_d_inr, inr_terms) = (map(sum, zip(*slopes)) for slopes in (filters, inrs))
    rate = filter_step_size(float(loss), d_filter, lr_d_inr, 1.0, lr_max=lr_max)
    return [float(loss), d_filter, lr_d_inr, rate], [0.0, filter_terms, inr_terms, 0.0]


def assert_records_match_reference(hook, reference, lr_max):
    """The hook's rule inputs equal the reference's to float32 rounding of the terms summed into them (a sum of
    terms that nearly cancel keeps their absolute rounding, not a relative one), and its rates are the rule's on its
    own inputs."""
    records = hook.records
    expected = torch.tensor([values for values, _ in reference], dtype=torch.float64)
    magnitudes = torch.tensor([terms for _, terms in reference], dtype=torch.float64)
    gap = (records[:, :3] - expected[:, :3]).abs()
    bound = 1e-6 * expected[:, :3].abs() + 1e-6 * magnitudes[:, :3]
    assert (gap <= bound).all(), f"largest gap over bound {float((gap / bound.clamp_min(1e-300)).max()):.3g}"
    loss, d_filter, lr_d_inr, rate = records.T
    rule = filter_step_size_tensor(loss, d_filter, lr_d_inr, 1.0, lr_max=lr_max)
    torch.testing.assert_close(rate, rule, rtol=1e-12, atol=0)


def make_optimizers(kind: str, inr, filt):
    if kind == "two-adams":
        return [torch.optim.Adam(inr, lr=1e-2), torch.optim.Adam(filt, lr=1e-3)]
    if kind == "amsgrad-decay":
        return [torch.optim.Adam([{"params": inr, "lr": 1e-2}, {"params": filt}], amsgrad=True, weight_decay=1e-3)]
    if kind == "adamw":
        return [torch.optim.AdamW([{"params": inr, "lr": 1e-2}, {"params": filt}], weight_decay=1e-2)]
    if kind == "fused":  # step counts kept as tensors: the slopes take the on-device path
        return [torch.optim.Adam([{"params": inr, "lr": 1e-2}, {"params": filt}], fused=True)]
    return [torch.optim.SGD([{"params": inr, "lr": 0.05}, {"params": filt, "lr": 0.0}])]


KINDS = ["two-adams", "amsgrad-decay", "adamw", "fused", "sgd"]


@pytest.mark.parametrize(
    "kind,fused", [(kind, False) for kind in KINDS] + [("two-adams", True), ("amsgrad-decay", True), ("sgd", True)]
)
def test_rates_equal_the_reference_implementation(kind, fused):
    # The same float32 gradient and direction values are formed; only the order of the float64 sums differs.
    # Fused: the compiled kernels may also reorder the float32 products and the bias corrections, which moves a
    # slope by float32 rounding of its terms; where they nearly cancel that is large against the slope, and the
    # rule's |b / k| amplifies it further. So the inputs are compared within the terms' rounding, and the rate
    # with the rule on the hook's own inputs.
    net, x, y = make_problem(5)
    filt, inr = split_filter_parameters(net)
    optimizers = make_optimizers(kind, inr, filt)
    direction = "gradient" if kind == "sgd" else "adam"
    step = {}
    lr_max = 0.5 if kind == "sgd" else 1.0  # as in test_line_search_hook: wide, yet SGD stays stable
    hook = FilterLineSearch(
        filt, inr, optimizers, lambda: step["loss"], direction=direction, lr_max=lr_max, fused=fused
    )
    groups = [(o, g) for o in optimizers for g in o.param_groups]
    filter_groups = [(o, g) for o, g in groups if g["params"][0] is filt[0]]
    inr_groups = [(o, g) for o, g in groups if g["params"][0] is not filt[0]]
    expected = []
    for i in range(60):
        for opt in optimizers:
            opt.zero_grad(set_to_none=True)
        loss = ((net(x) - y) ** 2).mean()
        loss.backward()
        if i == 0:
            filt[0].grad = None  # the first filter layer lags one step behind the others in Adam's step count
        step["loss"] = loss
        expected.append(reference_record(filter_groups, inr_groups, loss.detach(), direction, lr_max))
        for opt in optimizers:
            opt.step()
    if direction == "adam":  # the gradient rule asks for rates far above any stable lr_max: always at the bound
        assert any(0.0 < values[3] < lr_max for values, _ in expected)
    assert_records_match_reference(hook, expected, lr_max)
    assert hook.history == hook.records[:, 3].tolist()
    assert hook.compiled == fused  # the compiled arithmetic ran, not the unfused fallback


def test_a_fused_line_search_that_cannot_compile_warns_and_runs_unfused():
    rates = []
    for fused in (False, True):
        net, x, y = make_problem(9)
        filt, inr = split_filter_parameters(net)
        opt = torch.optim.Adam([{"params": inr, "lr": 1e-2}, {"params": filt}])
        step = {}
        hook = FilterLineSearch(filt, inr, opt, lambda step=step: step["loss"], lr_max=1.0, fused=fused)
        if fused:

            def no_compiler(*args):
                raise torch._inductor.exc.InductorError(RuntimeError("Failed to find C compiler"), "")

            hook._compiled_row = no_compiler
        for _ in range(4):
            opt.zero_grad()
            step["loss"] = ((net(x) - y) ** 2).mean()
            step["loss"].backward()
            if fused and hook.records.shape[0] == 1:
                with pytest.warns(UserWarning, match="fused line search could not be compiled.*runs unfused"):
                    opt.step()
            else:
                opt.step()
        rates.append(hook.history)
        assert not hook.compiled
    assert rates[0] == rates[1]


def test_rates_under_a_grad_scaler_equal_the_reference():
    net, x, y = make_problem(6)
    filt, inr = split_filter_parameters(net)
    opt_inr, opt_filter = torch.optim.Adam(inr, lr=1e-2), torch.optim.Adam(filt, lr=1e-3)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**10)
    step = {}
    hook = FilterLineSearch(filt, inr, [opt_inr, opt_filter], lambda: step["loss"], lr_max=1.0, grad_scaler=scaler)
    expected = []
    for _ in range(20):
        opt_inr.zero_grad()
        opt_filter.zero_grad()
        loss = ((net(x) - y) ** 2).mean()
        scaler.scale(loss).backward()
        step["loss"] = loss
        unscale = 1.0 / scaler.get_scale()
        groups = [(opt_filter, opt_filter.param_groups[0])], [(opt_inr, opt_inr.param_groups[0])]
        expected.append(reference_record(*groups, loss.detach(), "adam", 1.0, unscale))
        scaler.step(opt_inr)  # unscales the INR's gradients in place; the filter's are still scaled
        scaler.step(opt_filter)
        scaler.update()
    assert_records_match_reference(hook, expected, 1.0)


@pytest.mark.parametrize("rule", ["paper", "balance"])
def test_the_hook_reads_no_tensor_on_the_host(rule):
    net, x, y = make_problem(7)
    filt, inr = split_filter_parameters(net)
    opt = torch.optim.Adam([{"params": inr, "lr": 1e-2}, {"params": filt}])
    step = {}
    hook = FilterLineSearch(filt, inr, opt, lambda: step["loss"], rule=rule, lr_max=1.0)
    for i in range(3):
        opt.zero_grad()
        step["loss"] = ((net(x) - y) ** 2).mean()
        step["loss"].backward()
        if i == 0:
            opt.step()  # creates Adam's state
            continue
        # Adam keeps its step counts on the CPU (also when training on a GPU): reading those costs nothing
        with HostReads(frozenset(id(s["step"]) for s in opt.state.values())) as mode:
            opt.step()  # the hook, then Adam with the tensor rate
        assert mode.reads == []
    assert len(hook.history) == 3 and hook.last["lr"] == hook.history[-1]


def test_a_scheduler_on_the_filter_group_neither_breaks_the_history_nor_the_rate_adam_uses():
    # LambdaLR fills a tensor rate in place after every step; the hook sets it again before the next one. A twin
    # trained with plain float rates equal to the recorded ones must end bitwise equal: Adam used those rates.
    nets = [make_problem(8)[0] for _ in range(2)]
    _, x, y = make_problem(8)
    optimizers, schedulers = [], []
    for net in nets:
        filt, inr = split_filter_parameters(net)
        opt = torch.optim.Adam([{"params": inr, "lr": 1e-2}, {"params": filt, "lr": 1e-3}])
        optimizers.append(opt)
        schedulers.append(torch.optim.lr_scheduler.LambdaLR(opt, lambda t: 0.9**t))
    step = {}
    filt, inr = split_filter_parameters(nets[0])
    hook = FilterLineSearch(filt, inr, optimizers[0], lambda: step["loss"], lr_max=1.0)
    for i in range(15):
        for k, (net, opt, scheduler) in enumerate(zip(nets, optimizers, schedulers)):
            opt.zero_grad()
            loss = ((net(x) - y) ** 2).mean()
            loss.backward()
            step["loss"] = loss
            if k == 1:
                opt.param_groups[1]["lr"] = hook.history[i]
            opt.step()
            scheduler.step()
    assert len(set(hook.history)) > 1 and float(optimizers[0].param_groups[1]["lr"]) == 1e-3 * 0.9**15
    assert [r["lr"] for r in [hook.last]] == [hook.history[-1]]
    for a, b in zip(nets[0].parameters(), nets[1].parameters()):
        assert torch.equal(a, b)


def test_the_fused_line_search_compiles_once_while_the_schedule_moves_the_rates():
    # A rate passed as a number would be compiled in as a constant: a new graph every step, until dynamo gives up.
    net, x, y = make_problem(10)
    filt, inr = split_filter_parameters(net)
    opt = torch.optim.Adam([{"params": inr, "lr": 1e-2}, {"params": filt}])
    scheduler = torch.optim.lr_scheduler.LambdaLR(opt, [lambda t: 0.9**t, lambda t: 1.0])
    step = {}
    hook = FilterLineSearch(filt, inr, opt, lambda: step["loss"], lr_max=1.0, fused=True)
    graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    for _ in range(12):
        opt.zero_grad()
        step["loss"] = ((net(x) - y) ** 2).mean()
        step["loss"].backward()
        opt.step()
        scheduler.step()
    assert hook.compiled and torch._dynamo.utils.counters["stats"]["unique_graphs"] - graphs <= 1


def test_the_fused_line_search_hides_torchs_cuda_home_notice(caplog):
    net, _, _ = make_problem(10)
    filt, inr = split_filter_parameters(net)
    FilterLineSearch(filt, inr, torch.optim.Adam([{"params": inr}, {"params": filt}]), lambda: None, fused=True)
    logger = logging.getLogger("torch.utils.cpp_extension")
    logger.warning("No CUDA runtime is found, using CUDA_HOME='/usr/local'")
    logger.warning("something else")
    assert [record.getMessage() for record in caplog.records if record.name == logger.name] == ["something else"]


@torch._dynamo.config.patch(recompile_limit=1)
def test_the_fused_line_search_compiles_for_more_network_shapes_than_torchs_limit():
    # torch's own limit (8 by default; 1 here) would end the process with an error: the graph must be whole
    _, x, y = make_problem()
    for width in (5, 6, 7):
        net = FourierFeatureMLP(FilteredEncoding(PositionalEncoding(1, 4, 4.0)), 1, hidden_features=width)
        filt, inr = split_filter_parameters(net)
        opt = torch.optim.Adam([{"params": inr, "lr": 1e-2}, {"params": filt}])
        step = {}
        hook = FilterLineSearch(filt, inr, opt, lambda step=step: step["loss"], lr_max=1.0, fused=True)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no fallback to the unfused line search
            for _ in range(2):
                opt.zero_grad()
                step["loss"] = ((net(x) - y) ** 2).mean()
                step["loss"].backward()
                opt.step()
        assert hook.compiled
