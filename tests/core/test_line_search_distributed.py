"""Under DDP every process must set the same filter rate (the hook averages the loss across processes)."""

import os
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from rff_field.core.encodings import PositionalEncoding
from rff_field.core.filter import FilteredEncoding, split_filter_parameters
from rff_field.core.line_search import FilterLineSearch
from rff_field.inr.mlp import FourierFeatureMLP


def _worker(rank: int, world: int, port: int, out_dir: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    net = FourierFeatureMLP(FilteredEncoding(PositionalEncoding(1, 8, 8.0)), 1, hidden_features=16, hidden_layers=1)
    ddp = torch.nn.parallel.DistributedDataParallel(net)
    filt, inr = split_filter_parameters(net)
    opt = torch.optim.Adam([{"params": inr, "lr": 1e-2}, {"params": filt, "lr": 1e-3}])
    step = {}
    hook = FilterLineSearch(filt, inr, opt, lambda: step["loss"], lr_max=1.0)
    x = torch.linspace(-1, 1, 64)[:, None] + 0.01 * rank  # each process sees different data
    y = torch.sin(4 * x) * (1 + rank)
    local_losses, rule_losses = [], []
    for _ in range(10):
        opt.zero_grad()
        loss = ((ddp(x) - y) ** 2).mean()
        loss.backward()
        step["loss"] = loss
        local_losses.append(loss.item())
        opt.step()
        rule_losses.append(hook.last["loss"])
    torch.save(
        {
            "history": hook.history,
            "local_losses": local_losses,
            "rule_losses": rule_losses,
            "params": [p.detach() for p in net.parameters()],
        },
        os.path.join(out_dir, f"rank{rank}.pt"),
    )
    dist.barrier()  # neither process tears gloo down while the other still uses it
    dist.destroy_process_group()


def test_filter_rate_is_identical_across_processes(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(_worker, args=(2, port, str(tmp_path)), nprocs=2, join=True)
    r0, r1 = (torch.load(tmp_path / f"rank{r}.pt") for r in (0, 1))
    assert r0["local_losses"][0] != r1["local_losses"][0]  # the processes did see different losses
    assert r0["history"] == r1["history"] and len(r0["history"]) == 10
    mean_losses = [(a + b) / 2 for a, b in zip(r0["local_losses"], r1["local_losses"])]
    torch.testing.assert_close(torch.tensor(r0["rule_losses"]), torch.tensor(mean_losses), rtol=1e-6, atol=0)
    assert r0["rule_losses"] == r1["rule_losses"]
    for a, b in zip(r0["params"], r1["params"]):
        torch.testing.assert_close(a, b)
