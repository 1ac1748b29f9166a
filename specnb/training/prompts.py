"""User turns written by the target itself, to train the head on more prompts than the 320
human-written ones: `self_written(target, tokenizer, 4000)`.

The target is asked, through its chat template, to "write five different questions a curious
person might ask about {topic}, one per line, numbered 1 to 5" (three phrasings × the topics
below), sampled at T = 0.8 with one generator per request (seeded by the request's index), so
request k always gets the same text. Every line of a reply is a candidate, cleaned: without its
number, quotes or a "Question:" label, 4–40 words, no colon, ending in ? (or a request: a
verb such as "explain" first, ending in . or !), not talking about the task ("question"); exact duplicates (after lower-casing) dropped, and any line too
close to an eval prompt is dropped: one that shares an 8-word window with one, or most of whose
content words one holds.

Raw replies are cached in chunks of CHUNK requests under ~/.cache/specnb/self-prompts/, so a
larger count reuses every chunk made, and kept in the repository, data/head-data/self-prompts/
(`head_records.records_dir()`), so a new machine reuses them too. `prompt_pool` lists the
plan's prompts: the human ones, then these, chat-formatted. It does not answer them (`head_data`
does).
"""

import functools
import hashlib
import json
import re

import torch
from tqdm.auto import tqdm

from ..core.files import write_atomic
from ..models.loading import cache_dir
from .head_records import records_dir
from .slots import generate_stream

TEMPLATES = (
    "Write five different questions a curious person might ask about {topic}, one per line, "
    "numbered 1 to 5.",
    "Write five different requests people type to a helpful assistant about {topic}, one per "
    "line, numbered 1 to 5.",
    "Write five different practical how-to questions about {topic}, one per line, numbered 1 "
    "to 5.",
)
TEMPERATURE = 0.8
TOPICS = (
    "cooking", "baking bread", "gardening", "houseplants", "birds", "dogs", "cats", "the ocean",
    "volcanoes", "earthquakes", "the weather", "climate", "the moon", "the planets", "stars",
    "black holes", "electricity", "magnets", "light", "sound", "music theory", "the guitar",
    "the piano", "painting", "photography", "poetry", "novels", "grammar", "learning a language",
    "ancient Rome", "ancient Egypt", "the Middle Ages", "the printing press", "world maps",
    "mountains", "rivers", "deserts", "forests", "insects", "dinosaurs", "evolution", "genetics",
    "the human heart", "sleep", "nutrition", "vitamins", "exercise", "running", "swimming",
    "chess", "board games", "video games", "football", "basketball", "the Olympics",
    "personal finance", "saving money", "budgeting", "taxes", "starting a business", "job interviews",
    "writing a resume", "email etiquette", "time management", "studying for exams", "mathematics",
    "fractions", "geometry", "probability", "statistics", "algebra", "Python programming",
    "JavaScript", "databases", "the internet", "computer security", "passwords", "spreadsheets",
    "machine learning", "robots", "cars", "bicycles", "trains", "airplanes", "travel",
    "packing a suitcase", "camping", "hiking", "recycling", "saving energy at home",
    "home repairs", "cleaning", "laundry", "coffee", "tea", "chocolate", "friendship",
    "parenting", "public speaking", "philosophy", "economics", "elections", "the moon landing",
)
CHUNK = 256
# A line that does not end in "?" counts as a request only if it starts with one of these.
REQUEST_VERBS = frozenset(
    "explain describe write give suggest help tell recommend compare list summarize show "
    "create plan teach translate name find please".split())
EIGHT = 8  # words in a window that an eval prompt may not share
STOPWORDS = frozenset(
    "a an the and or but of to in on at for with about by from is are was were be been do does "
    "did how what why when where which who whom can could would should will i you my your me we "
    "it its this that these those some any one".split())


def words(text: str) -> list:
    return re.findall(r"[a-z0-9']+", text.lower())


def clean(line: str) -> str | None:
    """One line of a reply as a user turn, or None. Examples: '2. Why do cats purr?' ->
    'Why do cats purr?'; 'Here are five questions:' -> None (it talks about the task)."""
    quotes = '"“”\' '
    text, prefix = line, r"^\s*(\d+[.)]|[-*•]|(question|request|q)\s*\d*\s*:)"
    while True:  # "* 1. 2) Why ...?" -> "Why ...?"
        text = text.strip().strip(quotes)
        stripped = re.sub(prefix, "", text, flags=re.I)
        if stripped == text:
            break
        text = stripped
    found = words(text)
    if not 4 <= len(found) <= 40 or not 15 <= len(text) <= 240 or ":" in text \
            or '"' in text or {"question", "questions", "request", "requests"} & set(found):
        return None
    asks = text.endswith("?") or (found[0] in REQUEST_VERBS and text[-1] in ".!")
    return text if asks else None


@functools.lru_cache(maxsize=1 << 16)
def _profile(text: str) -> tuple:
    """(the text's 8-word windows, its set of words, its content words), kept per text: a pool
    of 4 000 prompts is checked against every eval and test prompt, each text many times."""
    found = words(text)
    windows = frozenset(tuple(found[i:i + EIGHT]) for i in range(len(found) - EIGHT + 1))
    return windows, frozenset(found), frozenset(found) - STOPWORDS


def too_close(text: str, references: list) -> bool:
    """Whether `text` shares an 8-word window with a reference, or a reference holds most
    (> 60 %) of its content words."""
    windows, _, content = _profile(text)
    for reference in references:
        theirs, their_words, _ = _profile(reference)
        if windows & theirs or (content and len(content & their_words) > 0.6 * len(content)):
            return True
    return False


class _Selection:
    """`select`'s pass over the lines of replies, fed a batch of replies at a time (the chunks
    of `self_written`), so that each line is cleaned and checked once."""

    def __init__(self, count: int, exclude: list, known: list = ()):
        self.count, self.exclude = count, list(exclude)
        self.seen = {" ".join(words(k)) for k in known}
        self.kept = []

    def add(self, replies: list) -> list:
        for line in (line for reply in replies for line in reply.splitlines()):
            if len(self.kept) == self.count:
                break
            text = clean(line)
            key = None if text is None else " ".join(words(text))
            if key is None or key in self.seen or too_close(text, self.exclude):
                continue
            self.seen.add(key)
            self.kept.append(text)
        return self.kept


def select(replies: list, count: int, exclude: list, known: list = ()) -> list:
    """Clean every line of `replies` in order; keep the first `count` that are new (not in `known`, not seen)
    and not too close to any of `exclude` (the eval prompts)."""
    return _Selection(count, exclude, known).add(replies)


def requests(start: int, stop: int) -> list:
    """Requests start..stop-1: request k asks template k % 3 about topic (k // 3) % topics."""
    return [TEMPLATES[k % len(TEMPLATES)].format(topic=TOPICS[(k // len(TEMPLATES)) % len(TOPICS)])
            for k in range(start, stop)]


def chunk_key(seed: int, max_new_tokens: int) -> str:
    """The folder name of the replies, a hash of everything that decides them."""
    return hashlib.sha256(json.dumps([TEMPLATES, TOPICS, TEMPERATURE, seed, max_new_tokens,
                                      CHUNK]).encode()).hexdigest()[:12]


def self_written(target, tokenizer, count: int, *, exclude: list, known: list = (),
                 seed: int = 0, rows: int = 64, max_new_tokens: int = 120,
                 max_chunks: int | None = None, generate: bool = True) -> list:
    """`count` cleaned user turns written by the target (fewer if `max_chunks` runs out, or
    with `generate=False` at the first chunk of replies neither cached nor kept in the repo)."""
    from ..models.loading import chat_ids

    if not isinstance(count, int) or count < 0:
        raise ValueError(f"count must be an int >= 0, got {count!r}")
    folder = cache_dir() / "self-prompts" / chunk_key(seed, max_new_tokens)
    kept_folder = records_dir() / "self-prompts" / folder.name
    folder.mkdir(parents=True, exist_ok=True)
    max_chunks = max_chunks or 4 * (count // CHUNK + 1)
    selection, chunk = _Selection(count, exclude, known), 0
    bar = tqdm(total=count, desc="prompts written by the target", unit="prompt",
               disable=count == 0)
    while len(selection.kept) < count and chunk < max_chunks:
        path, kept_copy = folder / f"chunk{chunk}.json", kept_folder / f"chunk{chunk}.json"
        if not path.exists() and kept_copy.exists():
            write_atomic(path, kept_copy.read_bytes())
        if not path.exists() and not generate:
            break
        if not path.exists():
            jobs = [(k, chat_ids(tokenizer, text)[0].tolist(), TEMPERATURE,
                     torch.Generator(device=target.device).manual_seed(seed * 1_000_003 + k))
                    for k, text in zip(range(chunk * CHUNK, (chunk + 1) * CHUNK),
                                       requests(chunk * CHUNK, (chunk + 1) * CHUNK))]
            out = dict(generate_stream(
                target, jobs, rows=rows, max_new_tokens=max_new_tokens,
                eos_id=tokenizer.eos_token_id, layers=(0,), top_k=1,
                columns=max(len(j[1]) for j in jobs) + max_new_tokens))
            texts = [tokenizer.decode(out[k]["ids"][out[k]["answer_start"]:],
                                      skip_special_tokens=True) for k, *_ in jobs]
            write_atomic(path, json.dumps(texts).encode())
        if not kept_copy.exists():
            write_atomic(kept_copy, path.read_bytes())
        chunk += 1
        bar.update(len(selection.add(json.loads(path.read_text()))) - bar.n)
    bar.close()
    return list(selection.kept)


def prompt_pool(target, tokenizer, self_prompts: int, *, seed: int = 0, rows: int = 64,
                generate: bool = True) -> list:
    """Chat-formatted ids of the human-written train prompts, then of `self_prompts` prompts
    the target wrote (none near an eval prompt; `generate=False`: only from replies kept)."""
    from ..models.data import load_prompts
    from ..models.loading import chat_ids

    human = [p["prompt"] for p in load_prompts("train")]
    written = self_written(target, tokenizer, self_prompts, seed=seed, rows=rows, known=human,
                           exclude=[p["prompt"] for p in load_prompts("eval")],
                           generate=generate) if self_prompts else []
    return [chat_ids(tokenizer, text)[0].tolist() for text in human + written]
