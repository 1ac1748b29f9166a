"""`python3 scripts/gpu_head.py`: the feature head's data and training at scale, on a lent GPU.

On a CPU, writing millions of answer tokens with the target and training epochs over them are
slow (data/README.md records the runs); a lent GPU does both at a larger scale within one
command, and only the products come back (the features themselves, ~6 KB per token, stay
there). Steps, each logged, inside one deadline (`--deadline`, 560 s by default, under the 10
minutes of one remote command):

    weights  dequantize the embedded GGUF if it was sent (scripts/gpu_transfer.py join first)
    data     python -m specnb.training.head_data --device D --rounds R --tokens N: first the
             shards the repository records (data/head-data/answers) are rebuilt, then new
             answers are generated; stopped with SIGINT at its budget (finished shards and
             their token records are kept). N is capped by the free disk.
    train    python -m specnb.training.train_head --device D --init data/head --rounds R
             --max-minutes M: the shipped head continued on every shard made (its epoch 0 is the
             start's own held-out figure, so it never comes back worse)
    export   into $OUT (at most 8 files of < 16 MiB come back): the summary, the head's config
             and record, its weights in parts with their SHA-256, the new token records (one
             .tar.gz), the logs

Here, afterwards: `python3 scripts/gpu_head.py receive FOLDER` re-joins the head into
~/.cache/specnb/head-gpu/ (check it: `python -m specnb.training.train_head --evaluate
~/.cache/specnb/head-gpu --split test`) and adds the new token records to data/head-data/answers,
so that any machine can rebuild the same data. `--device cpu --budget small` is the dry run
(one recorded shard rebuilt, no new answers, a minute of training). The remote command:

    python3 scripts/gpu_transfer.py join; python3 -m pip install -q --no-index --no-deps \\
        --no-compile --target .gpu-transfer/site .gpu-transfer/wheels/gguf-*.whl; \\
        PYTHONUNBUFFERED=1 python3 scripts/gpu_head.py
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import gpu_transfer

ROOT = gpu_transfer.ROOT
RECORDS = ROOT / "data" / "head-data" / "answers"
PART_BYTES = 15 * 2**20  # a returned file must stay under 16 MiB
BYTES_PER_TOKEN = 8_000  # a shard's size per answer token (fp16 features of 4 layers, top-16,
#                          prompt positions too), rounded up: the average shard is smaller, one
#                          of long human-written prompts comes near it
SETTINGS = {  # budget -> what the run asks for
    "full": dict(tokens=9_000_000, rounds=16, rows=512, epochs=2, batch_size=32, lr=1e-3,
                 data_share=0.55),
    "small": dict(tokens=1, rounds=16, rows=8, epochs=1, batch_size=16, lr=1e-3,
                  data_share=0.5),
}


def token_goal(requested: int, cached: int, free_bytes: int,
               bytes_per_token: int = BYTES_PER_TOKEN, reserve: float = 0.15) -> int:
    """The answer tokens to ask head_data for (a total: shards already `cached` count, and the
    recorded ones it rebuilds first take disk like new ones): `requested`, at most what the
    free disk holds beside the cache (`reserve` of it kept free)."""
    room = int(free_bytes * (1 - reserve) / bytes_per_token)
    return max(1, min(requested, cached + room))


def cached_tokens() -> int:
    """Answer tokens in the shards cached on this machine (the counts beside each shard)."""
    folder = gpu_transfer.cache_dir() / "head-data" / "shards"
    return sum(json.loads(p.read_text()).get("answer_tokens", 0)
               for p in folder.glob("*.json")) if folder.is_dir() else 0


def split_file(path: Path, out: Path, part_bytes: int = PART_BYTES) -> dict:
    """`path` cut into out/<name>.part-NN files by `gpu_transfer.split` (which also writes its
    manifest there); returns the manifest (sizes and hashes)."""
    return gpu_transfer.split(path, out, part_bytes)


def join_file(folder: Path, manifest: dict, destination: Path) -> Path:
    """Re-join a split file, checking every part and the whole; nothing is left on a mismatch."""
    for name, state in gpu_transfer.part_states(folder, manifest).items():
        if state != "ok":
            raise ValueError(f"{name}: missing or corrupted ({state})")
    partial = destination.with_suffix(destination.suffix + ".partial")
    with open(partial, "wb") as out:
        for part in manifest["parts"]:
            out.write((folder / part["name"]).read_bytes())
    if gpu_transfer.sha256_of(partial) != manifest["sha256"]:
        partial.unlink()
        raise ValueError(f"{manifest['file']}: the joined file's SHA-256 differs")
    partial.rename(destination)
    return destination


class Run:
    """One gpu_head run: its settings, the steps so far, and what goes back ($OUT)."""

    def __init__(self, args):
        self.args, self.settings = args, SETTINGS[args.budget]
        self.start, self.steps = time.monotonic(), []
        self.build = ROOT / "build" / "gpu-head"
        shutil.rmtree(self.build, ignore_errors=True)
        (self.build / "logs").mkdir(parents=True)
        self.out = Path(os.environ["OUT"]) if os.environ.get("OUT") else None
        self.records_before = {p.name for p in RECORDS.glob("*.json.gz")}
        site = ROOT / gpu_transfer.SITE_DIR
        self.env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
                    "PYTHONUNBUFFERED": "1", "TOKENIZERS_PARALLELISM": "false",
                    "PYTHONPATH": os.pathsep.join(
                        [str(ROOT)] + ([str(site)] if site.is_dir() else []) +
                        ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []))}

    def left_s(self) -> float:
        return self.args.deadline - (time.monotonic() - self.start)

    def execute(self, name: str, argv: list, budget_s: float, grace_s: float = 0) -> dict:
        """Run argv; at `budget_s` send SIGINT (the commands keep what they finished) and
        after `grace_s` more SIGKILL. Logged to build/gpu-head/logs/<name>.log."""
        log, started = self.build / "logs" / f"{name}.log", time.monotonic()
        with open(log, "w") as out:
            out.write("$ " + " ".join(argv) + "\n")
            out.flush()
            process = subprocess.Popen(argv, cwd=ROOT, env=self.env, stdout=out,
                                       stderr=subprocess.STDOUT, start_new_session=True)
            how = "finished"
            try:
                process.wait(timeout=max(1.0, budget_s))
            except subprocess.TimeoutExpired:
                how = "stopped at its budget (SIGINT)"
                os.killpg(process.pid, signal.SIGINT)
                try:
                    process.wait(timeout=max(1.0, grace_s))
                except subprocess.TimeoutExpired:
                    how = "killed (no exit after SIGINT)"
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
        tail = log.read_text(errors="replace").strip().splitlines()[-3:]
        step = {"step": name, "exit": process.returncode, "how": how,
                "seconds": round(time.monotonic() - started, 1), "budget_s": round(budget_s),
                "tail": tail}
        self.steps.append(step)
        self.export()
        print(f"{name}: {how}, exit {process.returncode}, {step['seconds']} s", flush=True)
        return step

    def machine(self) -> str:
        """The accelerator and versions, read once (in a child: this script imports no torch)."""
        if not hasattr(self, "_machine"):
            probe = ("import os, torch, transformers; from specnb.models.fast_path import "
                     "cpu_identity as c; d = torch.cuda.is_available() and "
                     "torch.cuda.get_device_properties(0); print((f'{d.name} ({d.total_memory "
                     "// 2**20} MiB), ' if d else '') + f\"{c()['name']} ({c()['isa']}), "
                     "{os.cpu_count()} CPU cores; torch {torch.__version__}, transformers "
                     "{transformers.__version__}\")")
            done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                                  env=self.env, timeout=120)
            self._machine = done.stdout.strip() or done.stderr.strip()[-200:]
        return self._machine

    def summary(self) -> dict:
        data_log = gpu_transfer.cache_dir() / "head-data" / "head-data-log.json"
        head = self.build / "head" / "training.json"
        return {"machine": self.machine(), "date": time.strftime("%Y-%m-%d"),
                "device": self.args.device, "budget": self.args.budget,
                "settings": self.settings, "token_goal": getattr(self, "goal", None),
                "disk_free_bytes": shutil.disk_usage(gpu_transfer.cache_dir()).free
                if gpu_transfer.cache_dir().exists() else None, "deadline_s": self.args.deadline,
                "wall_s": round(time.monotonic() - self.start, 1), "steps": self.steps,
                "head_data_runs": json.loads(data_log.read_text())[-1:]
                if data_log.is_file() else None,
                "training": json.loads(head.read_text()) if head.is_file() else None,
                "new_records": len(self.new_records())}

    def new_records(self) -> list:
        return sorted(p for p in RECORDS.glob("*.json.gz") if p.name not in self.records_before)

    def export(self) -> None:
        """Everything so far into build/gpu-head and, when set, $OUT (rewritten each step)."""
        (self.build / "gpu-head-summary.json").write_text(
            json.dumps(self.summary(), indent=1, default=str) + "\n")
        with tarfile.open(self.build / "gpu-head-logs.tar.gz", "w:gz") as archive:
            archive.add(self.build / "logs", arcname="logs")
        records = self.new_records()
        if records:
            with tarfile.open(self.build / "gpu-head-records.tar.gz", "w:gz") as archive:
                for path in records:
                    archive.add(path, arcname=path.name)
        head = self.build / "head"
        if (head / "model.safetensors").is_file() and not (self.build / "head.json").exists():
            parts = self.build / "head-parts"
            parts.mkdir(exist_ok=True)
            manifest = split_file(head / "model.safetensors", parts)
            manifest["config"] = json.loads((head / "config.json").read_text())
            (self.build / "head.json").write_text(json.dumps(manifest, indent=1) + "\n")
        if self.out is None:
            return
        self.out.mkdir(parents=True, exist_ok=True)
        files = [self.build / n for n in ("gpu-head-summary.json", "gpu-head-logs.tar.gz",
                                          "gpu-head-records.tar.gz", "head.json")]
        if (self.build / "head.json").exists():
            files += sorted((self.build / "head-parts").glob("*.part-*"))
        for path in files:
            if path.is_file():
                shutil.copy2(path, self.out / path.name)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command")
    receive = sub.add_parser("receive", help="here: take what a GPU run sent back")
    receive.add_argument("folder", type=Path)
    receive.add_argument("--head-out", type=Path,
                         default=gpu_transfer.cache_dir() / "head-gpu")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--budget", choices=sorted(SETTINGS), default="full")
    parser.add_argument("--deadline", type=float, default=560.0,
                        help="seconds for the whole run (default 560: one remote command)")
    args = parser.parse_args(argv)
    if args.command == "receive":
        return take_back(args.folder, args.head_out)
    run, s = Run(args), SETTINGS[args.budget]

    if not (gpu_transfer.cache_dir() / "smollm2-135m-instruct" / "config.json").is_file():
        run.execute("weights", [sys.executable, "-c", "from specnb.models.loading import "
                                "embedded_checkpoint as e; print(e())"], budget_s=120)
    cache = gpu_transfer.cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    goal = run.goal = token_goal(s["tokens"], cached_tokens(), shutil.disk_usage(cache).free)
    common = ["--device", args.device, "--rounds", str(s["rounds"])]
    data_budget = s["data_share"] * run.left_s()
    run.execute("data", [sys.executable, "-m", "specnb.training.head_data", *common,
                         "--tokens", str(goal), "--batch-size", str(s["rows"]),
                         "--max-new-tokens", "192"], budget_s=data_budget, grace_s=30)
    # --max-minutes counts from train_head's start, loading the shards included; 30 s are left
    # for the last held-out measurement and saving. SIGINT-then-kill only as a last resort.
    minutes = max(0.5, (run.left_s() - 30) / 60)
    run.execute("train", [sys.executable, "-m", "specnb.training.train_head", *common,
                          "--init", "data/head", "--out", str(run.build / "head"),
                          "--epochs", str(s["epochs"]), "--batch-size", str(s["batch_size"]),
                          "--lr", str(s["lr"]), "--bf16", "--max-minutes", f"{minutes:.2f}"],
                budget_s=max(30.0, run.left_s() - 5), grace_s=5)
    run.export()
    print(json.dumps(run.summary(), indent=1, default=str))
    return 0 if (run.build / "head" / "model.safetensors").is_file() else 1


def take_back(folder: Path, head_out: Path) -> int:
    """Here: the head re-joined into `head_out`, the new token records into data/."""
    folder = Path(folder)
    summary = json.loads((folder / "gpu-head-summary.json").read_text())
    print(json.dumps({k: summary[k] for k in ("device", "wall_s", "steps")}, indent=1))
    if (folder / "head.json").is_file():
        manifest = json.loads((folder / "head.json").read_text())
        head_out.mkdir(parents=True, exist_ok=True)
        join_file(folder, manifest, head_out / "model.safetensors")
        (head_out / "config.json").write_text(json.dumps(manifest["config"], indent=2) + "\n")
        if summary.get("training"):
            (head_out / "training.json").write_text(
                json.dumps(summary["training"], indent=2) + "\n")
        print(f"head: {head_out}")
    if (folder / "gpu-head-records.tar.gz").is_file():
        added = 0
        with tarfile.open(folder / "gpu-head-records.tar.gz") as archive:
            for member in archive.getmembers():
                name = Path(member.name).name
                if not member.isfile() or not name.endswith(".json.gz"):
                    raise ValueError(f"unexpected member {member.name} in the records archive")
                data = archive.extractfile(member).read()
                path = RECORDS / name
                if path.exists() and path.read_bytes() != data:
                    raise ValueError(f"{name} exists here with other content: not replaced")
                added += not path.exists()
                path.write_bytes(data)
        print(f"token records: {added} new in {RECORDS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
