"""train_head's loop: a run stopped midway and started again ends exactly where an
uninterrupted run ends (same history, same weights), from its checkpoint file."""

import pytest
import torch

from head_fixtures import random_head
from specnb.training import train_head
from tiny_models import tiny_llama

LAYERS = (0, 1)


def fake_examples(vocab: int, hidden: int, count: int = 12, seed: int = 0) -> list:
    """Examples shaped like head_data's shards: prompt positions unscored (-1)."""
    g = torch.Generator().manual_seed(seed)
    examples = []
    for i in range(count):
        n = 10 + i
        start = 4
        top = torch.randn(n - 1, vocab, generator=g).log_softmax(-1).topk(4, -1)
        top_ids = top.indices.to(torch.int32)
        top_ids[:start - 1] = -1
        examples.append({"ids": torch.randint(1, vocab, (n,), generator=g).tolist(),
                         "answer_start": start,
                         "features": torch.randn(n - 1, len(LAYERS), hidden, generator=g).half(),
                         "top_ids": top_ids, "top_logp": top.values.half()})
    return examples


def head_and_data() -> tuple:
    """A small random head on a tiny target, 12 training entries and 3 held-out ones."""
    target = tiny_llama(3)
    vocab, hidden = target.config.vocab_size, target.config.hidden_size
    head = random_head(target, seed=1, layers=LAYERS, std=0.05).head
    table = torch.full((vocab,), -1, dtype=torch.long)
    table[head.draft_to_target] = torch.arange(len(head.draft_to_target))
    entries = [train_head.to_entries(e, table) for e in fake_examples(vocab, hidden)]
    heldout = [train_head.to_entries(e, table) for e in fake_examples(vocab, hidden, 3, seed=1)]
    return head, entries, heldout


def run(head, entries, heldout, checkpoint, **overrides):
    settings = dict(epochs=2, batch_size=3, lr=1e-2, steps=2, step_decay=0.8,
                    generator=torch.Generator().manual_seed(5), log=lambda h: None,
                    checkpoint=checkpoint, checkpoint_seconds=0.0)
    return train_head.train(head, entries, heldout, **{**settings, **overrides})


@pytest.mark.parametrize("bf16", [False, True])
def test_a_stopped_run_resumes_to_the_same_result(tmp_path, monkeypatch, bf16):
    head, entries, heldout = head_and_data()
    start = {k: v.clone() for k, v in head.state_dict().items()}

    history, best_epoch = run(head, entries, heldout, None, bf16=bf16)
    finished = {k: v.clone() for k, v in head.state_dict().items()}
    assert any(not torch.equal(start[k], finished[k]) for k in start)  # it did train

    head.load_state_dict(start)
    checkpoint = tmp_path / "checkpoint.pt"
    calls, real = [0], train_head.unrolled_loss

    def stop_at_the_sixth_batch(*args):  # epoch 2 of 2 (4 batches per epoch)
        calls[0] += 1
        if calls[0] == 6:
            raise KeyboardInterrupt
        return real(*args)

    monkeypatch.setattr(train_head, "unrolled_loss", stop_at_the_sixth_batch)
    with pytest.raises(KeyboardInterrupt):
        run(head, entries, heldout, checkpoint, bf16=bf16)
    monkeypatch.setattr(train_head, "unrolled_loss", real)
    saved = torch.load(checkpoint, weights_only=False)
    assert (saved["epoch"], saved["done"], len(saved["history"])) == (1, 1, 1)

    head.load_state_dict(start)  # a new process starts from fresh weights: they must be replaced
    resumed, resumed_best = run(head, entries, heldout, checkpoint,
                                generator=torch.Generator().manual_seed(99), bf16=bf16)
    assert (resumed, resumed_best) == (history, best_epoch)
    for k in finished:
        assert torch.equal(head.state_dict()[k], finished[k]), k


def test_the_checkpoint_is_keyed_by_the_run(tmp_path, monkeypatch):
    monkeypatch.setattr(train_head, "shard_dir", lambda: tmp_path / "shards")
    parser_args = train_head.argparse.Namespace(epochs=3, lr=1e-3, out=tmp_path / "a",
                                                evaluate=None)
    a = train_head.checkpoint_path(parser_args, ["x/s1.pt", "x/s2.pt"])
    assert a.parent == tmp_path / "head-train" and a.parent.is_dir()
    parser_args.out = tmp_path / "b"  # another output folder: the same run
    assert train_head.checkpoint_path(parser_args, ["y/s1.pt", "y/s2.pt"]) == a
    parser_args.epochs = 4
    assert train_head.checkpoint_path(parser_args, ["x/s1.pt", "x/s2.pt"]) != a
    parser_args.epochs = 3
    assert train_head.checkpoint_path(parser_args, ["x/s1.pt"]) != a
    for name, weights in (("c", b"one head"), ("d", b"one head"), ("e", b"another head")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "model.safetensors").write_bytes(weights)
    keys = []
    for name in "cde":  # a continued run is keyed by its start's weights, not their folder
        parser_args.init = tmp_path / name
        keys.append(train_head.checkpoint_path(parser_args, ["x/s1.pt", "x/s2.pt"]))
    assert keys[0] == keys[1] != keys[2] and a not in keys


def test_a_continued_head_is_never_returned_worse_than_it_started(monkeypatch):
    """`--init`: the start's held-out figure is epoch 0 and the best so far; when every epoch
    measures worse, the start's weights come back unchanged."""
    head, entries, heldout = head_and_data()
    start = {k: v.clone() for k, v in head.state_dict().items()}
    figures = iter([[0.5, 0.2], [0.4, 0.1], [0.3, 0.1]])  # the start, then two worse epochs
    monkeypatch.setattr(train_head, "heldout_acceptance", lambda *a: next(figures))
    history, best_epoch = run(head, entries, heldout, None, measure_start=True)
    assert [h["epoch"] for h in history] == [0, 1, 2] and best_epoch == 0
    assert history[0]["expected_accepted_per_iteration"] == 0.7
    for k in start:
        assert torch.equal(head.state_dict()[k], start[k]), k

    figures = iter([[0.5, 0.2], [0.6, 0.3], [0.3, 0.1]])  # epoch 1 beats the start
    monkeypatch.setattr(train_head, "heldout_acceptance", lambda *a: next(figures))
    head.load_state_dict(start)
    history, best_epoch = run(head, entries, heldout, None, measure_start=True)
    assert best_epoch == 1 and any(not torch.equal(head.state_dict()[k], start[k]) for k in start)


def test_a_time_limit_stops_midway_measures_and_resumes_to_the_same_result(tmp_path,
                                                                           monkeypatch):
    """`max_seconds`: the epoch in progress stops at the limit, is measured (its history entry
    says where it stopped), the checkpoint keeps it, and a run without a limit resumes it to
    the result of an uninterrupted run."""
    head, entries, heldout = head_and_data()
    start = {k: v.clone() for k, v in head.state_dict().items()}
    # Held-out figures by measurement: epoch 1 is the best, the stopped state worse.
    figures = {"epoch 1": [0.5, 0.2], "epoch 2": [0.4, 0.2], "stopped": [0.3, 0.1]}
    order = iter(["epoch 1", "epoch 2", "stopped", "epoch 1", "epoch 2"])
    monkeypatch.setattr(train_head, "heldout_acceptance", lambda *a: figures[next(order)])
    history, best_epoch = run(head, entries, heldout, None)
    finished = {k: v.clone() for k, v in head.state_dict().items()}
    assert best_epoch == 1

    clock = iter(range(1000))  # each reading of the clock is one second later
    monkeypatch.setattr(train_head.time, "monotonic", lambda: float(next(clock)))
    head.load_state_dict(start)
    checkpoint = tmp_path / "checkpoint.pt"
    stopped, _ = run(head, entries, heldout, checkpoint, checkpoint_seconds=1e9,
                     max_seconds=6.5)  # 2 readings before the loop, 2 per batch: 3 batches
    assert [h["epoch"] for h in stopped] == [1]
    assert stopped[0]["stopped_at_time_limit"] == "3 of 4 batches"
    saved = torch.load(checkpoint, weights_only=False)
    assert (saved["epoch"], saved["done"]) == (0, 3)

    monkeypatch.setattr(train_head.time, "monotonic", __import__("time").monotonic)
    head.load_state_dict(start)
    resumed, resumed_best = run(head, entries, heldout, checkpoint,
                                generator=torch.Generator().manual_seed(99))
    assert resumed[0] == stopped[0]  # the stop's measurement stays on record
    assert resumed[1:] == history and resumed_best == best_epoch
    for k in finished:
        assert torch.equal(head.state_dict()[k], finished[k]), k


def test_an_engine_layout_head_trains_on_the_first_layers_and_regresses_on_the_last():
    """`--layout engines`: the head reads the data's first layers, raw (no per-layer norm), and
    the regression still finds the final state behind them (`final_index`)."""
    target = tiny_llama(3)
    vocab, hidden = target.config.vocab_size, target.config.hidden_size
    head = random_head(target, seed=1, layers=LAYERS[:1], std=0.05, feature_norms=False).head
    assert head.feature_norms is None and head.fc.in_features == hidden
    table = torch.full((vocab,), -1, dtype=torch.long)
    table[head.draft_to_target] = torch.arange(len(head.draft_to_target))
    entries = [train_head.to_entries(e, table) for e in fake_examples(vocab, hidden)]
    heldout = [train_head.to_entries(e, table) for e in fake_examples(vocab, hidden, 3, seed=1)]
    features = entries[0]["features"].float()[None]  # [1, T, 2, H]: one more layer than read
    assert torch.equal(head.project(features), head.project(features[:, :, :1]))
    regressed = []
    real = train_head.unrolled_loss

    def spy(head, batch, steps, step_decay, regression_weight, top_index):
        regressed.append(top_index)
        return real(head, batch, steps, step_decay, regression_weight, top_index)
    start = {k: v.clone() for k, v in head.state_dict().items()}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(train_head, "unrolled_loss", spy)
        history, _ = run(head, entries, heldout, None, regression_weight=1.0, final_index=1)
    assert set(regressed) == {1} and len(history) == 2
    assert not torch.equal(start["fc.weight"], head.state_dict()["fc.weight"])


def test_the_engine_layout_reads_a_prefix_of_the_data_layers():
    layers, norms = train_head.LAYOUTS["engines"]
    data = train_head.FEATURE_LAYERS
    assert tuple(data[:len(layers)]) == tuple(layers) and norms is False
    assert train_head.FINAL_STATE in data[len(layers):]  # the regression's truth stays reachable


def test_a_specnb_head_transfers_to_the_engines_layout_with_its_norms_folded():
    """Where every position's features have their layer's median RMS, the transferred head
    (norms folded into fc, the last layer dropped) projects exactly as the original did with
    that layer's part of fc set to zero; the other weights are the original's."""
    target = tiny_llama(3)
    head = random_head(target, seed=2, layers=(0, 1, 2)).head
    hidden = target.config.hidden_size
    with torch.no_grad():
        head.fc.weight[:, 2 * hidden:] = 0.0  # the layer the engines' layout drops
    g = torch.Generator().manual_seed(3)
    direction = torch.randn(20, 3, hidden, generator=g)
    unit = direction / direction.pow(2).mean(-1, keepdim=True).sqrt()
    features = unit * torch.tensor([2.0, 50.0, 7.0])[None, :, None]  # per-layer RMS 2, 50, 7
    moved = train_head.transfer_to_engines(head, [features], num_layers=2)
    assert moved.config.feature_layers == (0, 1) and moved.feature_norms is None
    assert torch.allclose(moved.project(features), head.project(features), atol=1e-4)
    assert torch.equal(moved.q_proj.weight, head.q_proj.weight)
    with pytest.raises(ValueError, match="already"):
        train_head.transfer_to_engines(moved, [features])
