"""The optimizer hook sets the filter's rate to the rule applied to independently recomputed quantities."""

import copy
import math
import pickle

import pytest
import torch
from torch import nn

from rff_field.core.encodings import PositionalEncoding
from rff_field.core.errors import UsageError
from rff_field.core.filter import FilteredEncoding, split_filter_parameters
from rff_field.core.line_search import FilterLineSearch
from rff_field.core.optim import LineSearchConfig, attach_line_search, named_param_groups
from rff_field.core.step_rule import balanced_step_size, filter_step_size
from rff_field.inr.mlp import FourierFeatureMLP

LR_INR, LR_MAX = 1e-2, 1.0


def make_problem(seed: int = 0):
    torch.manual_seed(seed)
    x = torch.linspace(-1, 1, 128)[:, None]
    y = torch.sin(3 * math.pi * x) + 0.5 * torch.sign(x)  # smooth part and an edge
    net = FourierFeatureMLP(FilteredEncoding(PositionalEncoding(1, 8, 8.0)), 1, hidden_features=32, hidden_layers=1)
    return net, x, y


def oracle_directions(net: nn.Module, optimizers: list, direction: str, grad_scale: float = 1.0) -> dict:
    """Per-unit-rate update of every parameter: step a copy of (net, optimizers) with every lr set to 1."""
    if direction == "gradient":
        return {name: -p.grad / grad_scale for name, p in net.named_parameters()}
    shadow_net = copy.deepcopy(net)
    params = dict(shadow_net.named_parameters())
    for p, q in zip(net.parameters(), shadow_net.parameters()):
        q.grad = p.grad.clone() / grad_scale
    name_of = {id(p): name for name, p in net.named_parameters()}
    before = {name: p.detach().clone() for name, p in params.items()}
    for opt in optimizers:
        groups = []
        for group in opt.param_groups:
            groups.append({"params": [params[name_of[id(p)]] for p in group["params"]], "lr": 1.0})
        shadow = torch.optim.Adam(groups)
        state = opt.state_dict()
        for group in state["param_groups"]:
            group["lr"] = 1.0
        shadow.load_state_dict(copy.deepcopy(state))  # load_state_dict would share the moment tensors
        shadow.step()
    return {name: params[name].detach() - before[name] for name in params}


def oracle_slopes(net, optimizers, direction, grad_scale=1.0) -> tuple[float, float]:
    """(d_filter, d_inr): directional derivatives of the loss along the filter's and the INR's update directions."""
    directions = oracle_directions(net, optimizers, direction, grad_scale)
    d_filter = d_inr = 0.0
    for name, p in net.named_parameters():
        d = float((p.grad.double() / grad_scale * directions[name].double()).sum())
        if ".filter." in name:
            d_filter += d
        else:
            d_inr += d
    return d_filter, d_inr


def expected_rate(net, optimizers, loss, inr_lr, direction, grad_scale=1.0, lr_max=LR_MAX, rule="paper"):
    d_filter, d_inr = oracle_slopes(net, optimizers, direction, grad_scale)
    if rule == "balance":
        return balanced_step_size(d_filter, d_inr, inr_lr, lr_max=lr_max)
    return filter_step_size(float(loss.detach()), d_filter, d_inr, inr_lr, lr_max=lr_max)


@pytest.mark.parametrize("filter_first,rule", [(False, "paper"), (True, "paper"), (True, "balance")])
def test_hook_sets_rule_value_for_either_stepping_order(filter_first, rule):
    # The rule's inputs are checked against the oracle at every step, whether or not the rate lands inside its
    # bounds: which steps do is a property of the floating-point path, not of the hook.
    net, x, y = make_problem()
    filt, inr = split_filter_parameters(net)
    opt_inr = torch.optim.Adam(inr, lr=LR_INR)
    opt_filter = torch.optim.Adam(filt, lr=123.0)  # the hook must overwrite this
    step = {}
    hook = FilterLineSearch(filt, inr, [opt_inr, opt_filter], lambda: step["loss"], rule=rule, lr_max=LR_MAX)
    order = [opt_filter, opt_inr] if filter_first else [opt_inr, opt_filter]
    slopes, recorded, losses = [], [], []
    for _ in range(200):
        for opt in order:
            opt.zero_grad()
        loss = ((net(x) - y) ** 2).mean()
        loss.backward()
        step["loss"] = loss
        d_filter, d_inr = oracle_slopes(net, order, "adam")
        slopes.append((loss.item(), d_filter, LR_INR * d_inr))
        for opt in order:
            opt.step()
        assert opt_filter.param_groups[0]["lr"] == hook.history[-1]
        last = hook.last
        recorded.append((last["loss"], last["d_filter"], last["lr_d_inr"]))
        losses.append(loss.item())
    assert len(hook.history) == 200
    torch.testing.assert_close(torch.tensor(recorded), torch.tensor(slopes), rtol=1e-4, atol=1e-12)
    if rule == "balance":
        rule_values = [balanced_step_size(d_f, lr_d_i, 1.0, lr_max=LR_MAX) for _, d_f, lr_d_i in recorded]
    else:
        rule_values = [filter_step_size(*inputs, 1.0, lr_max=LR_MAX) for inputs in recorded]
    assert hook.history == rule_values
    assert sum(losses[-10:]) / 10 < 0.2 * losses[0]


def test_hook_with_one_optimizer_of_two_groups_and_gradient_rule():
    net, x, y = make_problem(1)
    filt, inr = split_filter_parameters(net)
    opt = torch.optim.SGD([{"params": inr, "lr": 0.05}, {"params": filt, "lr": 0.0}])
    step = {}
    hook = FilterLineSearch(filt, inr, opt, lambda: step["loss"], direction="gradient", lr_max=0.5)
    losses = []
    for _ in range(200):
        opt.zero_grad()
        loss = ((net(x) - y) ** 2).mean()
        loss.backward()
        step["loss"] = loss
        exp = expected_rate(net, [opt], loss, 0.05, "gradient", lr_max=0.5)
        opt.step()
        assert hook.history[-1] == pytest.approx(exp, rel=1e-4, abs=1e-12)
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]


def test_hook_unscales_gradients_under_a_grad_scaler():
    rates = {}
    for use_scaler in (False, True):
        net, x, y = make_problem(2)
        filt, inr = split_filter_parameters(net)
        opt_inr, opt_filter = torch.optim.Adam(inr, lr=LR_INR), torch.optim.Adam(filt, lr=1e-3)
        scaler = torch.amp.GradScaler("cpu", init_scale=2.0**12, enabled=use_scaler)
        step = {}
        hook = FilterLineSearch(filt, inr, [opt_inr, opt_filter], lambda s=step: s["loss"], grad_scaler=scaler)
        for _ in range(30):
            opt_inr.zero_grad()
            opt_filter.zero_grad()
            loss = ((net(x) - y) ** 2).mean()
            scaler.scale(loss).backward()
            step["loss"] = loss
            scaler.step(opt_inr)  # unscales opt_inr's gradients only; the filter's are still scaled
            scaler.step(opt_filter)
            scaler.update()
        rates[use_scaler] = hook.history
    torch.testing.assert_close(torch.tensor(rates[True]), torch.tensor(rates[False]), rtol=1e-4, atol=1e-12)


@pytest.mark.parametrize("passed", [False, True])
def test_a_fused_adam_under_a_grad_scaler_gets_the_rates_of_unscaled_gradients(passed):
    rates = {}
    for use_scaler in (False, True):
        net, x, y = make_problem(2)
        filt, inr = split_filter_parameters(net)
        opt = torch.optim.Adam([{"params": inr, "lr": LR_INR}, {"params": filt, "lr": 1e-3}], fused=True)
        scaler = torch.amp.GradScaler("cpu", init_scale=2.0**12, enabled=use_scaler)
        step = {}
        hook = FilterLineSearch(filt, inr, opt, lambda s=step: s["loss"], lr_max=LR_MAX,
                                grad_scaler=scaler if passed else None)  # fmt: skip
        for _ in range(30):
            opt.zero_grad()
            loss = ((net(x) - y) ** 2).mean()
            scaler.scale(loss).backward()
            step["loss"] = loss
            scaler.step(opt)  # a fused optimizer unscales inside its step, with the scale GradScaler gives it
            scaler.update()
        rates[use_scaler] = hook.history
    assert len(set(rates[False])) > 1  # the rule's value, not only its bound
    torch.testing.assert_close(torch.tensor(rates[True]), torch.tensor(rates[False]), rtol=1e-4, atol=1e-12)


def test_adam_direction_requires_adam():
    net, _, _ = make_problem()
    filt, inr = split_filter_parameters(net)
    with pytest.raises(ValueError, match="Adam"):
        FilterLineSearch(filt, inr, torch.optim.SGD([{"params": inr}, {"params": filt}], lr=0.1), lambda: 0.0)


def test_filter_must_have_its_own_group():
    net, _, _ = make_problem()
    filt, inr = split_filter_parameters(net)
    with pytest.raises(ValueError, match="own"):
        FilterLineSearch(filt, inr, torch.optim.Adam(list(net.parameters())), lambda: 0.0)


def test_nan_loss_gives_lr_min_and_hook_can_be_removed():
    net, x, y = make_problem()
    filt, inr = split_filter_parameters(net)
    opt = torch.optim.Adam([{"params": inr, "lr": 1e-3}, {"params": filt, "lr": 1e-3}])
    hook = FilterLineSearch(filt, inr, opt, lambda: torch.tensor(float("nan")), lr_min=1e-7)
    ((net(x) - y) ** 2).mean().backward()
    opt.step()
    assert hook.history == [1e-7] and opt.param_groups[1]["lr"] == 1e-7
    hook.remove()
    assert type(opt.param_groups[1]["lr"]) is float and opt.param_groups[1]["lr"] == 1e-7  # a number again
    opt.param_groups[1]["lr"] = 5e-4
    opt.step()
    assert len(hook.history) == 1 and opt.param_groups[1]["lr"] == 5e-4


def test_hook_handles_parameters_at_different_adam_steps():
    # The filter's first layer gets no gradient on the first step, so its Adam step count lags the others.
    net, x, y = make_problem(3)
    filt, inr = split_filter_parameters(net)
    opt_inr, opt_filter = torch.optim.Adam(inr, lr=LR_INR), torch.optim.Adam(filt, lr=1e-3)
    step = {}
    hook = FilterLineSearch(filt, inr, [opt_inr, opt_filter], lambda: step["loss"], lr_max=LR_MAX)
    for i in range(5):
        opt_inr.zero_grad(set_to_none=True)
        opt_filter.zero_grad(set_to_none=True)
        loss = ((net(x) - y) ** 2).mean()
        loss.backward()
        if i == 0:
            filt[0].grad = None
        step["loss"] = loss
        expected = expected_rate(net, [opt_inr, opt_filter], loss, LR_INR, "adam") if i > 0 else None
        opt_inr.step()
        opt_filter.step()
        if expected is not None:
            assert hook.history[-1] == pytest.approx(expected, rel=1e-4, abs=1e-12)
    assert float(opt_filter.state[filt[0]]["step"]) == 4 and float(opt_filter.state[filt[1]]["step"]) == 5


def test_clipped_gradients_give_the_slopes_of_the_loss_own_gradient():
    # The optimizer steps with clipped gradients; the rule's first-order model needs the loss's own gradient along
    # those steps. max_norm is a thousandth of the norm, so clipping changes the gradients by construction.
    net, x, y = make_problem()
    filt, inr = split_filter_parameters(net)
    opt = torch.optim.Adam([{"params": filt, "lr": 0.0}, {"params": inr, "lr": LR_INR}])
    step = {}
    hook = FilterLineSearch(filt, inr, opt, lambda: step["loss"], lr_max=LR_MAX)

    def slopes(grads: dict) -> tuple[float, float]:
        directions = oracle_directions(net, [opt], "adam")  # from the gradients Adam steps with
        products = {name: float((grads[name] * directions[name].double()).sum()) for name in grads}
        return tuple(sum(v for n, v in products.items() if (".filter." in n) == filt) for filt in (True, False))

    # The factor of a clip does not carry over to the next step, nor past a step that was skipped after it; a
    # max_norm above the norm (factor 1000) leaves the gradients, and so the slopes, as they are.
    for factor, skipped in ((1e-3, False), (1e-3, False), (1e-3, True), (None, False), (1e-3, False), (1e3, False)):
        opt.zero_grad()
        step["loss"] = ((net(x) - y) ** 2).mean()
        step["loss"].backward()
        own = {name: p.grad.double().clone() for name, p in net.named_parameters()}
        if factor is not None:
            norm = float(torch.sqrt(sum((g**2).sum() for g in own.values())))
            assert float(hook.clip_grad_norm_(factor * norm)) == pytest.approx(norm)
        if skipped:
            continue
        d_filter, d_inr = slopes(own)
        opt.step()
        last = hook.last
        assert last["d_filter"] == pytest.approx(d_filter, rel=1e-6)
        assert last["lr_d_inr"] == pytest.approx(LR_INR * d_inr, rel=1e-6)
        assert last["lr"] == filter_step_size(last["loss"], last["d_filter"], last["lr_d_inr"], 1.0, lr_max=LR_MAX)


def two_optimizers(read=lambda loss: loss):
    """A problem with the INR and the filter in optimizers of their own; ``read`` is what ``loss_fn`` returns of
    the step's loss."""
    net, x, y = make_problem()
    filt, inr = split_filter_parameters(net)
    opt_inr, opt_filter = torch.optim.Adam(inr, lr=LR_INR), torch.optim.Adam(filt, lr=1e-3)
    step = {}
    hook = FilterLineSearch(filt, inr, [opt_inr, opt_filter], lambda: read(step["loss"]), lr_max=LR_MAX)

    def train(steps: int) -> None:
        for _ in range(steps):
            for opt in (opt_inr, opt_filter):
                opt.zero_grad()
            step["loss"] = ((net(x) - y) ** 2).mean()
            step["loss"].backward()
            opt_inr.step()
            opt_filter.step()

    return hook, train, (opt_inr, opt_filter), filt


@pytest.mark.parametrize("read", [lambda loss: loss.item(), lambda loss: loss.detach()], ids=["item", "detach"])
def test_a_loss_read_anew_at_every_hook_is_one_step(read):
    # A new object per call (a float, a detached tensor) must not start a second step when the second optimizer
    # steps: one rate per training step, set before either optimizer moved, as with the loss tensor itself.
    hook, train, _, _ = two_optimizers(read)
    reference, train_reference, _, _ = two_optimizers()
    train(3)
    train_reference(3)
    assert len(hook.history) == 3 and hook.history == reference.history


def test_a_loss_of_shape_one_is_the_step_loss():
    hook, train, _, _ = two_optimizers(lambda loss: loss.reshape(1))
    reference, train_reference, _, _ = two_optimizers()
    train(3)
    train_reference(3)
    assert hook.history == reference.history


def test_a_frozen_inr_steps_nothing_and_the_filter_still_gets_the_rule():
    net, x, y = make_problem()
    _, inr = split_filter_parameters(net)
    for p in inr:
        p.requires_grad_(False)
    opt = torch.optim.Adam(named_param_groups(net, inr_lr=LR_INR, filter_lr=1e-3))
    step = {}
    hook = attach_line_search(LineSearchConfig(lr_max=LR_MAX), opt, lambda: step["loss"])
    for _ in range(3):
        opt.zero_grad()
        step["loss"] = ((net(x) - y) ** 2).mean()
        step["loss"].backward()
        opt.step()
    last = hook.last
    assert last["lr_d_inr"] == 0.0 and last["d_filter"] < 0
    assert last["lr"] == filter_step_size(last["loss"], last["d_filter"], 0.0, 1.0, lr_max=LR_MAX)


def test_copying_or_pickling_a_line_search_is_refused():
    hook, train, _, _ = two_optimizers()
    train(1)
    for copy_of in (copy.deepcopy, copy.copy, pickle.dumps):
        with pytest.raises(TypeError, match="attach a new line search"):
            copy_of(hook)


def test_loading_the_optimizer_state_keeps_the_line_search_in_charge():
    hook, train, (_, opt_filter), _ = two_optimizers()
    train(2)
    saved = copy.deepcopy(opt_filter.state_dict())
    saved["param_groups"][0]["lr"] = 123.0  # outside the bounds: only a rate the rule did not set can be 123
    opt_filter.load_state_dict(saved)  # replaces the parameter groups
    train(1)
    assert len(hook.history) == 3 and float(opt_filter.param_groups[0]["lr"]) == hook.history[-1] <= LR_MAX


def test_misuse_is_refused_with_a_message():
    net, x, y = make_problem()
    filt, inr = split_filter_parameters(net)
    opt = torch.optim.Adam([{"params": filt}, {"params": inr}], lr=1e-3)
    loss = ((net(x) - y) ** 2).mean()
    with pytest.raises(UsageError, match="no filter parameters given"):
        FilterLineSearch(iter(()), inr, opt, lambda: loss)
    with pytest.raises(UsageError, match="no INR parameter is held"):
        FilterLineSearch(filt, inr, torch.optim.Adam(filt), lambda: loss)
    with pytest.raises(UsageError, match="no INR parameters given"):
        FilterLineSearch(filt, iter(()), opt, lambda: loss)
    with pytest.raises(UsageError, match="eps"):
        FilterLineSearch(filt, inr, opt, lambda: loss, eps=-1.0)
    with pytest.raises(UsageError, match="c1"):
        FilterLineSearch(filt, inr, opt, lambda: loss, c1=1.0)
    hook = FilterLineSearch(filt, inr, [opt, opt], lambda: per_sample.mean())
    with pytest.raises(UsageError, match="already has a FilterLineSearch"):
        FilterLineSearch(filt, inr, opt, lambda: loss)
    per_sample = (net(x) - y) ** 2
    per_sample.mean().backward()
    with pytest.raises(UsageError, match="without a closure"):
        opt.step(lambda: per_sample.mean())
    hook.loss_fn = lambda: per_sample
    with pytest.raises(UsageError, match=r"scalar loss, got shape \(128, 1\)"):
        opt.step()
    hook.loss_fn = lambda: per_sample.mean()
    opt.step()
    assert len(hook.history) == 1  # the optimizer given twice is hooked once
    hook.remove()
    FilterLineSearch(filt, inr, opt, lambda: loss)  # removed: another may be attached


def test_attach_finds_the_filter_by_group_name_and_refuses_unnamed_groups():
    net, x, y = make_problem()
    loss = ((net(x) - y) ** 2).mean()
    config = LineSearchConfig()
    filt, inr = split_filter_parameters(net)
    unnamed = torch.optim.Adam([{"params": filt}, {"params": inr}], lr=1e-3)
    with pytest.raises(UsageError, match="no names"):
        attach_line_search(config, unnamed, lambda: loss)
    named = torch.optim.Adam(named_param_groups(net, inr_lr=1e-3, filter_lr=1e-3))
    hook = attach_line_search(config, named, lambda: loss)
    assert hook is not None
    assert hook._filter_ids == {id(p) for p in filt}
    hook.remove()
    assert attach_line_search(LineSearchConfig(enabled=False), unnamed, lambda: loss) is None
    for filter_group in ({"name": "Filter"}, {}):  # a near miss would train the filter at a fixed rate
        near = torch.optim.Adam([{"name": "inr", "params": inr}, {**filter_group, "params": filt}], lr=1e-3)
        with pytest.raises(UsageError, match="no parameter group is named 'filter' \\(found ('Filter'|a group wi)"):
            attach_line_search(config, near, lambda: loss)
    plain = torch.optim.Adam([{"name": "inr", "params": inr}], lr=1e-3)  # a network without a filter
    assert attach_line_search(config, plain, lambda: loss) is None


def test_the_rule_constants_of_the_config_reach_the_rule():
    net, x, y = make_problem(4)
    opt = torch.optim.Adam(named_param_groups(net, inr_lr=LR_INR, filter_lr=1e-3))
    step = {}
    hook = attach_line_search(LineSearchConfig(lr_max=LR_MAX, eps=1.0), opt, lambda: step["loss"])
    for _ in range(20):
        opt.zero_grad()
        step["loss"] = ((net(x) - y) ** 2).mean()
        step["loss"].backward()
        opt.step()
    inputs = hook.records[:, :3].tolist()
    assert hook.history == [filter_step_size(*row, 1.0, lr_max=LR_MAX, eps=1.0) for row in inputs]
    assert hook.history != [filter_step_size(*row, 1.0, lr_max=LR_MAX) for row in inputs]  # eps=1 matters here


def test_filter_parameters_no_optimizer_holds_are_refused_and_frozen_ones_named():
    net, _, _ = make_problem()
    filt, inr = split_filter_parameters(net)
    opt = torch.optim.Adam([{"params": inr}, {"params": filt[1:]}])
    with pytest.raises(UsageError, match=r"not all held by the given optimizers$"):
        FilterLineSearch(filt, inr, opt, lambda: 0.0)
    filt[0].requires_grad_(False)
    with pytest.raises(UsageError, match="those left out are frozen: pass only the filter's trained parameters"):
        FilterLineSearch(filt, inr, opt, lambda: 0.0)
