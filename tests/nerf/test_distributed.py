"""Multi-process training (torch DDP, as ``--machine.num-devices N``): every process sets the same filter rate
from the loss averaged across processes, so the filters stay identical. Two CPU processes in a gloo group."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from nerfstudio.field_components.field_heads import FieldHeadNames
from torch.nn.parallel import DistributedDataParallel

from rff_field.core.embedding import EmbeddingConfig
from rff_field.core.filter import split_filter_parameters
from rff_field.core.line_search import FilterLineSearch
from rff_field.core.step_rule import filter_step_size
from rff_field.nerf.field import make_nerf_field
from rff_field.nerf.mesh_export import samples_at

STEPS = 4
LR_MAX = 10.0  # wide bounds so that the rate depends on the loss instead of sitting at a bound


def _worker(rank: int, world_size: int, port: int, out_dir: str) -> None:
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size)
    try:
        torch.manual_seed(0)  # same initial weights everywhere (DDP also broadcasts them)
        field = make_nerf_field(
            EmbeddingConfig(pe_bands="nerf-pytorch", num_frequencies=4),
            EmbeddingConfig(pe_bands="nerf-pytorch", num_frequencies=2, filtered=False),
            base_mlp_num_layers=2,
            base_mlp_layer_width=16,
            head_mlp_num_layers=1,
            head_mlp_layer_width=8,
            skip_connections=(),
        )
        filter_params, inr_params = split_filter_parameters(field)
        ddp = DistributedDataParallel(field)
        opt_inr = torch.optim.Adam(inr_params, lr=5e-4)
        opt_filter = torch.optim.Adam(filter_params, lr=1e-3)
        holder = {}
        search = FilterLineSearch(
            filter_params, inr_params, [opt_inr, opt_filter], lambda: holder["loss"], lr_max=LR_MAX
        )

        generator = torch.Generator().manual_seed(100 + rank)  # each process sees different data
        records = []
        for _ in range(STEPS):
            points = torch.rand(64, 3, generator=generator) * 2 - 1
            dirs = torch.nn.functional.normalize(torch.randn(64, 3, generator=generator), dim=-1)
            target = torch.rand(64, 3, generator=generator) * (1 + rank)
            out = ddp(samples_at(points, dirs))
            loss = ((out[FieldHeadNames.RGB] - target) ** 2).mean() + 1e-3 * out[FieldHeadNames.DENSITY].mean()
            holder["loss"] = loss
            for opt in (opt_inr, opt_filter):
                opt.zero_grad()
            loss.backward()
            opt_filter.step()  # filter first: the rate must still be computed before anything moved
            opt_inr.step()
            records.append({"local_loss": float(loss), **search.last})
        flat = torch.cat([p.detach().flatten() for p in filter_params]).tolist()
        Path(out_dir, f"rank{rank}.json").write_text(json.dumps({"records": records, "filter": flat}))
    finally:
        dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_two_processes_share_the_rate_and_keep_identical_filters(tmp_path):
    mp.spawn(_worker, args=(2, _free_port(), str(tmp_path)), nprocs=2, join=True)
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    r0, r1 = (r["records"] for r in ranks)
    for a, b in zip(r0, r1):
        assert a["local_loss"] != b["local_loss"]  # the processes saw different batches
        mean_loss = (a["local_loss"] + b["local_loss"]) / 2
        assert np.isclose(a["loss"], mean_loss, rtol=1e-6) and np.isclose(b["loss"], mean_loss, rtol=1e-6)
        assert a["lr"] == b["lr"]
        expected = filter_step_size(mean_loss, a["d_filter"], a["lr_d_inr"], 1.0, lr_max=LR_MAX)
        assert np.isclose(a["lr"], expected, rtol=1e-6)
    # the reduction matters: with a process's own loss the rule would give another rate on some step
    own = [filter_step_size(a["local_loss"], a["d_filter"], a["lr_d_inr"], 1.0, lr_max=LR_MAX) for a in r0]
    assert any(not np.isclose(o, a["lr"], rtol=1e-6) for o, a in zip(own, r0))
    np.testing.assert_array_equal(ranks[0]["filter"], ranks[1]["filter"])
