"""GECA at corpus scale: time and peak RSS per corpus size, in memory against a memory
budget, side by side in one run, each run in its own child process (so its peak RSS is
its own), and whether the two files are identical.

The corpus is real English-and-other text found on this machine (docstrings and comments
of the installed Python packages, the standard library, /usr/share/doc with whatever
documentation packages are installed, man pages, and, when installed, the dictd
dictionaries of /usr/share/dictd (e.g. Debian's dict-gcide, dict-wn: definitions and
quotations) and the fortune files): sentences or clauses of 4-30 tokens, deduplicated,
shuffled with seed 0, cached in ~/.cache/compgen/bench/geca-sentences-v2.txt. The script
says which sources it found and how many sentences each gave. Sizes beyond what the
machine holds are reported as missing, not padded with repeats.

    python scripts/bench/bench_geca_scale.py --sizes 10000,100000,1000000 --budget 1G --json out.json
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import random
import re
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

from _harness import ROOT, cpu_flag_list, cpu_model, load_average

CACHE = Path.home() / ".cache" / "compgen" / "bench"
CORPUS = CACHE / "geca-sentences-v2.txt"
DICTD = Path("/usr/share/dictd")
FORTUNES = Path("/usr/share/games/fortunes")
SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")
TOKEN = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)?|\d+|[^\w\s]")
ROFF_ESCAPE = re.compile(r"\\f[A-Z0-9]|\\f\[[^\]]*\]|\\\(..|\\\[[^\]]*\]|\\[-&e|^ ]|\\s[-+]?\d")
# dictionary entries are clauses split by ';', quotes and brackets rather than sentences
CLAUSE = re.compile(r"(?<=[.!?;])\s+|\s*[\[\]\"“”]\s*|\n\s*\n")
SENSE_NUMBER = re.compile(r"^\s*(?:\d+\.|[a-z]\)|\d+:|[nvsar] \d+:)\s*")
TEXT_SUFFIXES = (".rst", ".md", ".txt", ".html", ".pod", ".pm", ".h", ".py")


CPU_FLAGS = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512_bf16")


def _sentences(text: str, out: set) -> None:
    for part in SENTENCE.split(re.sub(r"\s+", " ", text)):
        tokens = TOKEN.findall(part)
        _keep(tokens, out)


def _keep(tokens: list[str], out: set) -> None:
    if 4 <= len(tokens) <= 30 and tokens[0][0].isalpha() \
            and sum(t[0].isalpha() for t in tokens) >= 0.7 * len(tokens):
        out.add(" ".join(tokens))


def _clauses(text: str, out: set) -> None:
    text = re.sub(r"<[^>]+>|[{}\\]", " ", text)
    for part in CLAUSE.split(text):
        _keep(TOKEN.findall(SENSE_NUMBER.sub("", part.strip())), out)


def _dictionaries():
    """(source name, text) of every dictd dictionary and fortune file installed."""
    for path in sorted(DICTD.glob("*.dict.dz")) if DICTD.is_dir() else []:
        with gzip.open(path) as fh:           # dictzip is gzip-compatible
            yield f"dictd:{path.name.split('.')[0]}", fh.read().decode("utf-8", "ignore")
    if FORTUNES.is_dir():
        text = []
        for path in sorted(FORTUNES.iterdir()):
            if path.is_file() and "." not in path.name:
                text.append(path.read_text(encoding="utf-8", errors="ignore").replace("\n%\n", "\n\n"))
        if text:
            yield "fortunes", "\n\n".join(text)


def _text_files():
    roots = [sys.prefix, sysconfig.get_paths()["stdlib"], "/usr/lib/python3", "/usr/share/doc",
             "/usr/share/perl", "/usr/share/perl5", "/usr/include"]
    for root in roots:
        for folder, _, names in os.walk(root):
            for name in names:
                path = os.path.join(folder, name)
                if name.endswith(TEXT_SUFFIXES) or name.startswith(("README", "NEWS", "copyright")):
                    yield path, open
                elif name.endswith(".gz") and path.startswith("/usr/share/doc"):
                    yield path, gzip.open


def _man_pages():
    for folder, _, names in os.walk("/usr/share/man"):
        for name in names:
            if name.endswith(".gz"):
                yield os.path.join(folder, name)


def build_corpus(path: Path = CORPUS) -> list[str]:
    """The cached sentence list (built once: a few minutes), printing the sentences each
    source adds."""
    if path.exists():
        return path.read_text(encoding="utf-8").splitlines()
    found: set[str] = set()

    def report(source: str, before: int) -> None:
        print(f"corpus source {source}: {len(found) - before:,} new distinct sentences", flush=True)

    before = len(found)
    for file, opener in _text_files():
        try:
            with opener(file, "rb") as fh:
                text = fh.read(5_000_000).decode("utf-8", "ignore")
        except OSError:
            continue
        if file.endswith(".html"):
            text = re.sub(r"<[^>]+>", " ", text)
        _sentences(text, found)
    report("documentation files (Python packages, standard library, /usr/share/doc)", before)
    before = len(found)
    for file in _man_pages():
        try:
            with gzip.open(file) as fh:
                raw = fh.read().decode("utf-8", "ignore")
        except (OSError, EOFError):
            continue
        lines = [line[3:] if line[:3] in (".B ", ".I ") else line for line in raw.splitlines()
                 if not line.startswith((".", "'")) or line[:3] in (".B ", ".I ")]
        _sentences(ROFF_ESCAPE.sub("", "\n".join(lines)), found)
    report("man pages", before)
    for source, text in _dictionaries():
        before = len(found)
        _clauses(text, found)
        report(source, before)
    sentences = sorted(found)
    random.Random(0).shuffle(sentences)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text("\n".join(sentences) + "\n", encoding="utf-8")
    tmp.replace(path)
    return sentences


def run_child(corpus: Path, out: Path, budget: str, extra: list[str]) -> dict:
    """One `compgen augment geca` in a child process: wall time and the peak RSS the
    child reports for itself (its VmHWM, which, unlike getrusage, does not count this
    process's memory at the fork)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-m", "compgen", "augment", "geca", str(corpus), "--preset", "lm",
           "--n-sample", "all", "--memory-budget", budget, *extra, "-o", str(out)]
    tic = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    stdout, stderr = proc.communicate()
    seconds = time.perf_counter() - tic
    if proc.returncode != 0:
        raise SystemExit(f"error: {' '.join(cmd)} failed:\n{stderr.strip()}")
    partitions = re.search(r"join partitions\s*│\s*([\d,]+)", stdout)
    shards = re.search(r"extraction shards\s*│\s*([\d,]+)", stdout)
    peak = re.search(r"peak memory\s*│\s*([\d,]+) MB", stdout)
    data = out.read_bytes()
    return {"seconds": round(seconds, 2), "peak_rss_mb": int(peak.group(1).replace(",", "")),
            "partitions": int(partitions.group(1).replace(",", "")) if partitions else None,
            "shards": int(shards.group(1).replace(",", "")) if shards else None,
            "rows": data.count(b"\n"), "sha256": hashlib.sha256(data).hexdigest()[:16],
            "load_average_after": load_average(), "command": " ".join(cmd[1:])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--budget", default="1G", help="--memory-budget of the budgeted runs")
    parser.add_argument("--skip-memory-above", type=int, default=None,
                        help="no in-memory run above this many sentences")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--corpus-only", action="store_true",
                        help="build (or read) the cached corpus, print its size and stop")
    args = parser.parse_args()
    print(f"CPU: {cpu_model('?')}; {os.cpu_count()} cores; flags: {' '.join(cpu_flag_list(CPU_FLAGS))}")
    print(f"load average at start: {load_average()}")
    sentences = build_corpus()
    corpus_id = hashlib.sha256(CORPUS.read_bytes()).hexdigest()[:12]
    print(f"corpus: {len(sentences):,} distinct real sentences ({CORPUS}, sha256 {corpus_id})")
    if args.corpus_only:
        return
    rows = []
    work = CACHE / "geca-scale"
    work.mkdir(parents=True, exist_ok=True)
    for size in (int(s) for s in args.sizes.split(",")):
        if size > len(sentences):
            print(f"{size:>9,}: only {len(sentences):,} real sentences on this machine: not run")
            rows.append({"sentences": size, "missing": True, "available": len(sentences)})
            continue
        corpus = work / f"corpus-{corpus_id}-{size}.txt"     # the first `size` sentences
        if not corpus.exists():
            corpus.write_text("\n".join(sentences[:size]) + "\n", encoding="utf-8")
        row = {"sentences": size}
        runs = [("budget", args.budget)]
        if args.skip_memory_above is None or size <= args.skip_memory_above:
            runs.insert(0, ("memory", "none"))
        for name, budget in runs:
            row[name] = run_child(corpus, work / f"out-{corpus_id}-{size}-{name}.tsv", budget, [])
            r = row[name]
            print(f"{size:>9,} {name:>6}: {r['seconds']:8.1f} s  peak {r['peak_rss_mb']:6,} MB  "
                  f"shards {r['shards']}  partitions {r['partitions']}  rows {r['rows']:,}  sha {r['sha256']}  "
                  f"load {r['load_average_after']}", flush=True)
        if "memory" in row:
            row["identical"] = row["memory"]["sha256"] == row["budget"]["sha256"]
            row["time_ratio_budget_over_memory"] = round(row["budget"]["seconds"] / row["memory"]["seconds"], 3)
            row["rss_ratio_budget_over_memory"] = round(row["budget"]["peak_rss_mb"] / row["memory"]["peak_rss_mb"], 3)
            print(f"{size:>9,}: identical={row['identical']}  time x{row['time_ratio_budget_over_memory']}"
                  f"  peak RSS x{row['rss_ratio_budget_over_memory']}")
        rows.append(row)
    report = {"cpu": cpu_model("?"), "cpu_flags": cpu_flag_list(CPU_FLAGS), "cores": os.cpu_count(),
              "budget": args.budget, "corpus_sentences": len(sentences), "corpus_sha256": corpus_id,
              "rows": rows,
              "load_average_end": os.getloadavg()}
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
