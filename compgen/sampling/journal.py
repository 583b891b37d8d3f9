"""The journal of a sampling job: its accepted samples written as they are accepted.

``compgen sample EXPORT -o OUT`` appends every round's accepted samples to
``OUT.partial`` (samples TSV lines, ``x<TAB>y<TAB>logprob``, the log-probability exact),
followed by a ``#round`` line with where the job stands. ``OUT`` itself is still written
once, atomically, when the job ends (the ``n`` most probable, ranked); the journal is then
removed. A job that is interrupted (Ctrl-C, SIGTERM, a lost machine) keeps its journal,
and the same command with ``--resume`` goes on from its last complete round: an export's
sample ``i`` decodes stored tuple ``i`` with random draws keyed by ``i`` (the decoding
contract), so the resumed job writes the file the uninterrupted one would have written.

The first line names the job (a digest of the export's manifest and every option that
changes which samples are kept); a journal of another job is refused, never mixed in.
The C++ runner appends its rounds itself (``hand_over``), in the same lines; the first
line, the check of the key and the removal stay here, so a job started on one backend
goes on on any other.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from compgen.errors import Interrupted, SettingError, UserError
from compgen.io import field_tokens, token_field
from compgen.runtimes.manifest import Manifest

MAGIC = "#compgen-sample-journal"
VERSION = 1
# Every round is written through to the operating system at once (a killed job loses no
# complete round), but forced to the disk at most this often: an fsync per round was 7 %
# of a large job's time. A lost machine then costs at most these seconds of rounds, which
# --resume decodes again (the journal's last complete round is where it goes on).
SYNC_SECONDS = 5.0


def journal_path(out: str | os.PathLike) -> Path:
    out = Path(out)
    return out.with_name(out.name + ".partial")


def job_key(manifest: Manifest, options, lm_description: str | None) -> str:
    """What decides the kept samples: the export (its manifest, checksums included) and
    the options that change the stream of candidates or the filter. Threads, device and
    backend do not (one seed, one result on every backend)."""
    asked = {k: v for k, v in vars(options).items() if k not in ("threads", "device")}
    if not asked.get("novel_inputs"):   # off: the key of a job from before the option
        asked.pop("novel_inputs", None)
    text = json.dumps({"manifest": manifest.to_json(), "options": asked, "lm": lm_description},
                      sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


@dataclass
class Position:
    """Where a job stands after a complete round (``collect_decoded``'s loop state)."""
    rounds: int = 0
    first: int = 0          # rows decoded so far: the next round's first sample index
    stalled: int = 0
    strategy: str = "greedy"
    temperature: float = 1.0
    samples: list = field(default_factory=list)   # (x, y, logprob) in acceptance order


class Journal:
    """``OUT.partial`` of one job. ``resume``: read what an interrupted run of the same job
    left (``position``); otherwise any old journal is replaced."""

    def __init__(self, out: str | os.PathLike, key: str, resume: bool = False,
                 log=print):
        self.path, self.key, self.log = journal_path(out), key, log
        self.position: Position | None = None
        self.accepted = 0   # samples it holds
        self.handed_over = False
        self.synced = time.monotonic()
        if self.path.is_dir():
            raise UserError(f"{self.path}: a folder where the job keeps its journal (beside "
                            "-o); remove it or write to another path")
        if resume:
            if not self.path.is_file():
                raise SettingError(f"`resume`: {self.path} does not exist (nothing to resume; "
                                   "run without it)")
            try:
                self.position = self._read()
            except UnicodeDecodeError:
                raise UserError(f"{self.path}: not a compgen sample journal (not UTF-8 "
                                "text); run without --resume to start again") from None
            self.accepted = len(self.position.samples)
        mode = "a" if self.position is not None else "w"
        if mode == "w":   # beside the output, whose folder the job makes
            self.path.parent.mkdir(parents=True, exist_ok=True)
        # held open for the whole job (one write per round); closed by close()
        self.handle = open(self.path, mode, encoding="utf-8")  # noqa: SIM115
        try:
            if self.position is None:
                self.handle.write(f"{MAGIC}\t{VERSION}\t{key}\n")
                self._sync()
            else:   # drop what followed the last complete round: it is decoded again
                self.handle.truncate(self.complete_bytes)
        except BaseException:
            self.close(finished=self.position is None)
            raise

    def _read(self) -> Position:
        position, pending, complete = Position(), [], 0
        with open(self.path, encoding="utf-8", newline="") as f:
            head = f.readline()
            parts = head.rstrip("\n").split("\t")
            if parts[:1] != [MAGIC] or len(parts) != 3 or parts[1] != str(VERSION):
                raise UserError(f"{self.path}:1: not a compgen sample journal")
            if parts[2] != self.key:
                raise UserError(f"{self.path}: the journal of another job (other export or "
                                "options); run the same command as before, or without "
                                "--resume to start again")
            complete = len(head.encode())
            for lineno, line in enumerate(f, 2):
                if not line.endswith("\n"):
                    break   # cut off mid-line: the round it belongs to is not complete
                fields = line.rstrip("\n").split("\t")
                try:
                    if fields[0] == "#round":
                        rounds, first, stalled = map(int, fields[1:4])
                        position = Position(rounds, first, stalled, fields[4], float(fields[5]),
                                            position.samples + pending)
                        pending = []
                        complete += len(line.encode())
                    else:
                        x, y, logprob = fields
                        pending.append((field_tokens(x), field_tokens(y), float(logprob)))
                except ValueError:
                    raise UserError(f"{self.path}:{lineno}: damaged journal line") from None
        self.complete_bytes = complete
        return position

    def record(self, accepted: list, position: Position) -> None:
        """One complete round: its accepted samples, then where the job stands."""
        lines = [f"{token_field(s.x)}\t{token_field(s.y)}\t{s.logprob!r}\n" for s in accepted]
        lines.append(f"#round\t{position.rounds}\t{position.first}\t{position.stalled}\t"
                     f"{position.strategy}\t{position.temperature!r}\n")
        self.handle.write("".join(lines))
        self.handle.flush()
        if time.monotonic() - self.synced >= SYNC_SECONDS:
            self._sync()
        self.accepted += len(accepted)

    def hand_over(self) -> Path:
        """The path, for a writer in another process (the C++ runner appends every round
        in the lines ``record`` writes): this handle is closed, its first line (or the
        cut back to the last complete round) already on disk."""
        self._sync()
        self.handle.close()
        self.handed_over = True
        return self.path

    def _sync(self) -> None:
        self.handle.flush()
        os.fsync(self.handle.fileno())
        self.synced = time.monotonic()

    def __enter__(self) -> Journal:  # noqa: PYI034 (typing.Self: Python 3.11+; 3.10 is supported)
        return self

    def __exit__(self, kind, error, trace) -> None:
        """Success, or an error a rerun would meet again: the journal goes. Interrupted
        (Ctrl-C, SIGTERM: not an ``Exception``; a runner killed: ``Interrupted``): it
        stays, and the log says so."""
        interrupted = kind is not None and (not issubclass(kind, Exception)
                                            or issubclass(kind, Interrupted))
        self.close(finished=not interrupted)
        if interrupted and self.handed_over:   # what the other process wrote
            with contextlib.suppress(OSError, UserError):
                self.accepted = len(self._read().samples)
        if interrupted:
            self.log(f"{self.path} keeps {self.accepted} accepted samples: the same command "
                     "with --resume goes on from there")

    def close(self, finished: bool) -> None:
        """Finished (the output written) or failed for good: the journal goes; interrupted:
        it stays for ``--resume``."""
        try:
            if not finished and not self.handle.closed:   # kept for --resume: on the disk
                self._sync()
            self.handle.close()   # may fail to write its buffer (a full disk)
        except OSError:
            if not finished:
                raise
        finally:
            if finished:
                with contextlib.suppress(FileNotFoundError):
                    self.path.unlink()
