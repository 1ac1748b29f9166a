"""specnb.training.common: the shared learning-rate schedule and training.json record."""

import argparse
import json
import math
import time

import pytest
import torch

from specnb.training.common import warmup_cosine, write_record


def test_warmup_cosine_by_hand():
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    schedule = warmup_cosine(optimizer, 100)  # warm-up of 5 steps
    factors = []
    for _ in range(100):
        factors.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        schedule.step()
    assert factors[0] == pytest.approx(0.2) and factors[4] == pytest.approx(0.5 * (1 + math.cos(math.pi * 0.04)))
    assert factors[50] == pytest.approx(0.5) and factors[99] < 0.01


def test_write_record(tmp_path, capsys):
    args = argparse.Namespace(out=tmp_path, seed=3)
    record = write_record(tmp_path, "specnb.training.train_head", args, ["--seed", "3"],
                          time.perf_counter(), "cpu", seed=3, prompts=7)
    assert json.loads((tmp_path / "training.json").read_text()) == record
    assert list(record)[:3] == ["command", "seed", "prompts"]
    assert record["command"] == "python -m specnb.training.train_head --seed 3"
    assert record["args"] == {"out": str(tmp_path), "seed": "3"} and "device cpu" in record["hardware"]
    assert record["cpu"]["name"] and record["cpu"]["isa"]  # every record names its CPU
    assert json.loads(capsys.readouterr().out) == record
