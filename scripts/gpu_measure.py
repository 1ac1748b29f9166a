"""The measurements of the GPU run, one per call: `python3 scripts/gpu_measure.py STEP --json F`.

    env           device name, versions (torch, transformers, python, CUDA)
    weights       the embedded checkpoint, dequantized from the GGUF by specnb's own loader
    sync          batched `verify` + `sample` under torch.cuda.set_sync_debug_mode("error"):
                  no host sync inside them (on a CPU the same calls run, nothing is asserted)
    verify_share  the share of one speculative iteration (γ draft forwards of [B, 1], one target
                  forward of [B, γ+1], softmax, bonus `sample`, `verify`) spent outside the
                  forwards, on synthetic logits [B, γ+1, V]
    latency       t(k)/t(1): one target forward scoring k new tokens after a cached prefix
    loop_syncs    host syncs per iteration of `specnb.speculative` (head chain and tree, the
                  distilled draft), counted by torch.cuda.set_sync_debug_mode("warn")

Timings depend on shapes, not weights: the forwards run a randomly initialised model of the
embedded target's config (the prepared checkpoint's config.json, else the copy committed as
scripts/embedded-target-config.json), or its real weights when they are there; the draft is a
random model of data/draft/config.json. CUDA events time everything on a GPU (perf_counter on a
CPU); each timing is a median after warm-up. It writes one JSON and runs no benchmark loop.
scripts/gpu_check.py calls it, one process per step, with a time budget.
"""

import argparse
import contextlib
import inspect
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from gpu_transfer import cache_dir  # noqa: E402  (scripts/ is sys.path[0])

CONFIG_COPY = ROOT / "scripts" / "embedded-target-config.json"
DRAFT_CONFIG = ROOT / "data" / "draft" / "config.json"
CHECKPOINT = "smollm2-135m-instruct"  # = the folder specnb.models.loading.embedded_checkpoint() makes
SETTINGS = {  # per budget: full on the GPU, small for the CPU dry run
    "full": {"sync_batch": 8, "share_batches": [1, 8, 32], "share_repeats": 20,
             "latency_counts": [1, 2, 4, 8, 16, 32, 64, 128, 256, 512], "latency_repeats": 7,
             "warmup": 3, "loop_tokens": 32},
    "small": {"sync_batch": 2, "share_batches": [1, 2], "share_repeats": 2,
              "latency_counts": [1, 2, 4], "latency_repeats": 1, "warmup": 1, "loop_tokens": 8},
}
GAMMA, PREFIX_LEN = 4, 200


def dtype_for(device: torch.device) -> torch.dtype:
    """bfloat16 on a GPU, float32 on a CPU (as specnb.models.loading.default_dtype)."""
    return torch.bfloat16 if device.type == "cuda" else torch.float32


def timed_ms(function, device: torch.device) -> float:
    """Milliseconds one call of `function` takes on `device` (CUDA events on a GPU)."""
    if device.type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        function()
        end.record()
        end.synchronize()
        return start.elapsed_time(end)
    start = time.perf_counter()
    function()
    return (time.perf_counter() - start) * 1e3


def call_unchecked(function, *args, **kwargs):
    """Call a specnb.core function with check=False when it has that parameter, dropping keyword
    arguments it does not take (its signature is allowed to change)."""
    parameters = inspect.signature(function).parameters
    if "check" in parameters:
        kwargs["check"] = False
    return function(*args, **{k: v for k, v in kwargs.items() if k in parameters})


def target_config() -> tuple[dict, str]:
    """The embedded target's config: the prepared checkpoint's, else the committed copy."""
    prepared = cache_dir() / CHECKPOINT / "config.json"
    source = prepared if prepared.is_file() else CONFIG_COPY
    return json.loads(source.read_text()), str(source)


def random_model(config: dict, device, dtype):
    """A randomly initialised causal LM of `config` on `device`: same shapes, same timings."""
    from transformers import AutoConfig, AutoModelForCausalLM

    fields = {k: v for k, v in config.items() if k not in ("architectures", "dtype",
                                                           "transformers_version")}
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(AutoConfig.for_model(**fields))
    return model.to(dtype).eval()


def target_model(device, dtype):
    """(model, what it is): the real embedded weights when prepared here, else random ones."""
    config, source = target_config()
    checkpoint = cache_dir() / CHECKPOINT
    if (checkpoint / "model.safetensors").is_file():
        from transformers import AutoModelForCausalLM
        model = AutoModelForCausalLM.from_pretrained(checkpoint, dtype=dtype).to(device).eval()
        return model, f"embedded weights ({checkpoint})"
    return random_model(config, device, dtype), f"random weights, config {source}"


@torch.inference_mode()
def forward_samples(model, batch: int, token_counts, repeats: int, warmup: int) -> dict:
    """k -> [ms] of one forward of `batch` rows × k new tokens after a cached PREFIX_LEN prefix,
    every logit kept (as verifying k drafts needs); the k interleaved round by round."""
    from transformers import DynamicCache

    device, vocab = model.device, model.config.vocab_size
    generator = torch.Generator().manual_seed(0)
    prefix = torch.randint(0, vocab, (batch, PREFIX_LEN), generator=generator).to(device)
    # transformers 5.24 renamed `past_key_values` to `cache`; accept either release.
    name = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
    cache = {name: DynamicCache(), "use_cache": True}
    model(prefix, **cache)
    new_ids = {k: torch.randint(0, vocab, (batch, k), generator=generator).to(device)
               for k in token_counts}
    samples = {k: [] for k in token_counts}
    for round_index in range(warmup + repeats):
        for k in token_counts:
            ms = timed_ms(lambda: model(new_ids[k], **cache), device)
            cache[name].crop(-k)  # drop the k new tokens (negative: so in every 5.x)
            if round_index >= warmup:
                samples[k].append(ms)
    return samples


def synthetic_step(batch: int, vocab: int, device, dtype, temperature: float, ragged: bool):
    """Inputs as the loop has them (target logits [B, γ+1, V], draft probs and drafts) and one
    `verify + sample` step on them; returns (step, its inputs)."""
    from specnb.core import logits_to_probs, sample, verify

    generator = torch.Generator(device=device).manual_seed(0)
    target_logits = (3 * torch.randn(batch, GAMMA + 1, vocab, device=device,
                                     generator=generator)).to(dtype)  # [B, γ+1, V]
    draft_logits = target_logits[:, :GAMMA].float() + torch.randn(
        batch, GAMMA, vocab, device=device, generator=generator)  # a draft that often agrees
    draft_probs = logits_to_probs(draft_logits, temperature)  # [B, γ, V]
    draft_ids = call_unchecked(sample, draft_probs.reshape(-1, vocab), generator=generator) \
        .view(batch, GAMMA)
    num_drafts = torch.randint(0, GAMMA + 1, (batch,), device=device, generator=generator) \
        if ragged else None

    def step():
        target_probs = logits_to_probs(target_logits, temperature)  # [B, γ+1, V]
        bonus = call_unchecked(sample, target_probs[:, GAMMA], generator=generator)  # [B]
        result = call_unchecked(verify, target_probs[:, :GAMMA], draft_probs, draft_ids,
                                bonus.unsqueeze(1), num_drafts=num_drafts, generator=generator)
        return getattr(result, "tokens", result)  # a Verdict, or the tokens themselves
    return step, num_drafts


@contextlib.contextmanager
def no_host_sync(device):
    """torch.cuda.set_sync_debug_mode("error") inside; on a CPU, nothing (yields False)."""
    if device.type != "cuda":
        yield False
        return
    previous = torch.cuda.get_sync_debug_mode()
    torch.cuda.set_sync_debug_mode("error")
    try:
        yield True
    finally:
        torch.cuda.set_sync_debug_mode(previous)


def step_env(device, settings) -> dict:
    import transformers
    info = {"device": torch.cuda.get_device_name(device) if device.type == "cuda"
            else f"CPU {platform.machine()}, {torch.get_num_threads()} threads",
            "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                         "python": platform.python_version(), "cuda": torch.version.cuda,
                         "cudnn": torch.backends.cudnn.version()},
            "cuda_available": torch.cuda.is_available()}
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        info["gpu"] = {"memory_gib": round(props.total_memory / 2**30, 1),
                       "multiprocessors": props.multi_processor_count,
                       "capability": f"{props.major}.{props.minor}"}
    return info


def step_weights(device, settings) -> dict:
    from specnb.models.loading import embedded_checkpoint
    start = time.perf_counter()
    path = embedded_checkpoint()  # dequantizes the GGUF once if the checkpoint is missing
    return {"checkpoint": str(path), "seconds": time.perf_counter() - start}


def step_sync(device, settings) -> dict:
    vocab = target_config()[0]["vocab_size"]
    batch, cases = settings["sync_batch"], []
    for temperature in (0.0, 1.0):
        for ragged in (False, True):
            step, num_drafts = synthetic_step(batch, vocab, device, dtype_for(device),
                                              temperature, ragged)
            step()  # warm-up outside: first calls may allocate or load kernels
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            with no_host_sync(device) as asserted:
                tokens = step()  # raises RuntimeError on a host sync when asserted
            tokens = tokens.cpu()
            drafts = num_drafts.cpu() if num_drafts is not None else torch.full((batch,), GAMMA)
            emitted = (tokens >= 0).sum(1)
            if tokens.shape != (batch, GAMMA + 1) or not bool((emitted >= 1).all()) \
                    or not bool((emitted <= drafts + 1).all()) or int(tokens.max()) >= vocab:
                raise AssertionError(f"verify returned malformed tokens {tokens.tolist()}")
            cases.append({"temperature": temperature, "ragged_num_drafts": ragged,
                          "asserted_no_sync": asserted})
    detector = None
    if device.type == "cuda":  # the check is not vacuous: a deliberate .item() must be caught
        try:
            with no_host_sync(device):
                torch.ones(1, device=device).sum().item()
            detector = False
        except RuntimeError:
            detector = True
        if not detector:
            raise AssertionError("set_sync_debug_mode('error') did not catch a deliberate .item()")
    return {"batch": batch, "gamma": GAMMA, "vocab": vocab, "cases": cases,
            "sync_detector_works": detector,
            "note": "no host sync inside verify + sample" if device.type == "cuda" else
            "cpu: calls exercised, no sync-debug mode to assert with"}


def step_verify_share(device, settings) -> dict:
    dtype, (repeats, warmup) = dtype_for(device), (settings["share_repeats"], settings["warmup"])
    target, what = target_model(device, dtype)
    draft = random_model(json.loads(DRAFT_CONFIG.read_text()), device, dtype)
    vocab, rows = target.config.vocab_size, []
    for batch in settings["share_batches"]:
        target_ms = statistics.median(forward_samples(target, batch, [GAMMA + 1], repeats,
                                                      warmup)[GAMMA + 1])
        draft_ms = statistics.median(forward_samples(draft, batch, [1], repeats, warmup)[1])
        step, _ = synthetic_step(batch, vocab, device, dtype, 1.0, ragged=False)
        for _ in range(warmup):
            step()
        verify_ms = statistics.median(timed_ms(step, device) for _ in range(repeats))
        iteration_ms = GAMMA * draft_ms + target_ms + verify_ms
        rows.append({"batch": batch, "draft_forward_ms": draft_ms, "target_forward_ms": target_ms,
                     "verify_sample_ms": verify_ms, "iteration_ms": iteration_ms,
                     "share": verify_ms / iteration_ms,
                     "share_without_draft": verify_ms / (target_ms + verify_ms)})
    return {"gamma": GAMMA, "vocab": vocab, "prefix_len": PREFIX_LEN, "temperature": 1.0,
            "dtype": str(dtype).replace("torch.", ""), "target": what,
            "draft": f"random weights, config {DRAFT_CONFIG.relative_to(ROOT)}",
            "repeats": repeats, "rows": rows,
            "what": "verify_sample_ms = softmax of target logits [B, γ+1, V] + bonus sample + "
                    "verify, on synthetic logits; iteration = γ draft forwards [B, 1] + one "
                    "target forward [B, γ+1] + verify_sample; share_without_draft leaves the "
                    "draft forwards out (as for n-gram drafts)"}


def step_latency(device, settings, png: Path | None = None) -> dict:
    dtype = dtype_for(device)
    model, what = target_model(device, dtype)
    counts = settings["latency_counts"]
    samples = forward_samples(model, 1, counts, settings["latency_repeats"], settings["warmup"])
    median_ms = [statistics.median(samples[k]) for k in counts]
    record = {"token_counts": counts, "median_ms": median_ms,
              "ms_per_token": [ms / k for ms, k in zip(median_ms, counts)],
              "ratio_to_one_token": [ms / median_ms[0] for ms in median_ms],
              "samples_ms": [samples[k] for k in counts], "prefix_len": PREFIX_LEN,
              "repeats": settings["latency_repeats"],
              "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
              "dtype": str(dtype).replace("torch.", ""), "model": what}
    if png is not None:
        try:  # the notebooks' plot of the same record
            from specnb.viz.latency import plot_forward_latency
            plot_forward_latency(record).savefig(png, dpi=110, bbox_inches="tight")
            record["plot"] = png.name
        except Exception as error:  # noqa: BLE001  (a plot is a bonus; the numbers are the point)
            record["plot_error"] = f"{type(error).__name__}: {error}"
    return record


def step_loop_syncs(device, settings) -> dict:
    """Host syncs per iteration of the real loop (`specnb.speculative`), by drafter: on a GPU
    counted by torch.cuda.set_sync_debug_mode("warn") (every warning is one sync), on a CPU by
    specnb.core.host.HostReads(as_accelerator=True) (every host read that would be one)."""
    import warnings

    import specnb
    from specnb.core.host import HostReads
    from specnb.drafters import FeatureDrafter
    from specnb.models.pairs import load_embedded_draft, load_embedded_head

    target, how = target_model(device, dtype_for(device))
    head = load_embedded_head(target).head
    draft = load_embedded_draft(device, target.dtype)
    ids = torch.randint(0, target.config.vocab_size, (1, 40),
                        generator=torch.Generator().manual_seed(0)).to(device)
    cases = {"head chain γ=3": (FeatureDrafter(head), 3, 0.0),
             "head chain γ=3, T=0.7": (FeatureDrafter(head), 3, 0.7),
             "head tree (4, 2)": (FeatureDrafter(head, tree=(4, 2)), 2, 0.0),
             "distilled draft γ=4": (draft, 4, 0.0)}
    loop = sys.modules["specnb.methods.speculative"]
    speculate, rows = loop.speculate, []
    for name, (drafter, gamma, temperature) in cases.items():
        seen = {}

        def counted(run):  # only the loop's own iterations, not the prompt's fill
            if device.type == "cuda":
                torch.cuda.synchronize(device)
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    torch.cuda.set_sync_debug_mode("warn")
                    try:
                        speculate(run)
                    finally:
                        torch.cuda.set_sync_debug_mode(0)
                # A warning names the Python line that asked: specnb's loop, or the model's code
                # (transformers' forward, paid by any loop that calls it), counted apart.
                syncs = [w for w in caught if "synchroniz" in str(w.message)]
                ours = [w for w in syncs if f"{os.sep}specnb{os.sep}" in w.filename]
                seen.update(syncs=len(ours), model_syncs=len(syncs) - len(ours),
                            sites=sorted({f"{Path(w.filename).name}:{w.lineno}" for w in ours})[:5])
            else:
                with HostReads(as_accelerator=True) as reads:
                    speculate(run)
                seen.update(syncs=reads.total, model_syncs=sum(reads.outside.values()),
                            sites=sorted(reads.reads)[:5])
            seen["iterations"] = run.step

        loop.speculate = counted
        try:
            specnb.speculative(target, drafter, ids, gamma=gamma,
                               max_new_tokens=settings["loop_tokens"],
                               temperature=temperature, generator=torch.Generator(
                                   device=device).manual_seed(0))
        finally:
            loop.speculate = speculate
        rows.append({"drafter": name, **seen,
                     "per_iteration": seen["syncs"] / max(seen["iterations"], 1),
                     "model_per_iteration": seen["model_syncs"] / max(seen["iterations"], 1)})
    return {"model": how, "counted_by": "torch.cuda.set_sync_debug_mode" if device.type == "cuda"
            else "specnb.core.host.HostReads(as_accelerator=True)", "rows": rows}


STEPS = {"env": step_env, "weights": step_weights, "sync": step_sync,
         "verify_share": step_verify_share, "latency": step_latency, "loop_syncs": step_loop_syncs}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("step", choices=sorted(STEPS))
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--budget", choices=sorted(SETTINGS), default="full")
    parser.add_argument("--json", type=Path, required=True, help="where to write the result")
    parser.add_argument("--png", type=Path, default=None, help="latency: where to plot it")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit(f"--device {args.device}: torch {torch.__version__} sees no CUDA device")
    extra = {"png": args.png} if args.step == "latency" else {}
    result = STEPS[args.step](device, SETTINGS[args.budget], **extra)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result)[:2000])


if __name__ == "__main__":
    main()
