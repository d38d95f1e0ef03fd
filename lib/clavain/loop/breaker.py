"""The loop's circuit breaker: CLOSED → HALF_OPEN → OPEN, so a fresh-context loop that keeps
failing the same way stops itself instead of burning its budget overnight.

Three counts watch consecutive iterations: no progress, the same error (after
`normalise_error`), permission denials. A count one short of its threshold puts the breaker in
HALF_OPEN (a warning: one more such iteration opens it); a count at its threshold opens it.
HALF_OPEN closes again on an iteration that made progress with every count below its warning
level. OPEN refuses iterations (`allows()` is False) until `cooldown_seconds` have passed; then
one probe iteration runs in HALF_OPEN: a clean one (progress, nothing at a warning level)
closes the breaker, anything else opens it again with a new cooldown.

State lives in one JSON file per loop task (`limits.breaker_path`), not in a run's folder, so a
new run of the same task starts where the last one left it: an open breaker stays open until a
person resets it. A missing or damaged file is a fresh CLOSED breaker, never a crash. The file
is read again before every decision and every change is a read-modify-write under its lock
(`limits.locked`), so two loops of one task count every iteration and a person's reset made
while a loop runs is what that loop sees next.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from clavain.errors import ClavainError
from clavain.fsutil import read_json_object, write_json_atomic
from clavain.loop.limits import locked
from clavain.loop.rate_limit import is_time

CLOSED, HALF_OPEN, OPEN = "CLOSED", "HALF_OPEN", "OPEN"
STATES = (CLOSED, HALF_OPEN, OPEN)
COUNTS = ("no_progress", "same_error", "permission_denials")
HISTORY_LIMIT = 50
FORMAT_VERSION = 1
EXCERPT_CHARS = 160

# What `normalise_error` masks, in this order (earlier masks eat text later ones would see).
_TEMP_PATH = re.compile(r"(?:/private)?/(?:tmp|var/tmp|var/folders)/\S*"
                        r"|[A-Za-z]:\\\S*?\\Temp\\\S*", re.IGNORECASE)
_TEMP_NAME = re.compile(r"\btmp[a-z0-9_]{8}\b")  # tempfile.mkstemp's names outside /tmp
_UUID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b",
                   re.IGNORECASE)
_HEX_PREFIXED = re.compile(r"\b0x[0-9a-f]+\b", re.IGNORECASE)
_HEX_ID = re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,}\b", re.IGNORECASE)
_DIGITS = re.compile(r"\d+")
_SPACE = re.compile(r"\s+")


def normalise_error(text: str | None) -> str:
    """`text` with what differs between two runs of the same failure masked, so a loop stuck
    on one error is seen as stuck even though each run prints another line number or temp
    folder. Masked, in order: temporary paths (`/tmp/…`, `/var/tmp/…`, `/var/folders/…`,
    `/private/var/folders/…`, `C:\\…\\Temp\\…`, up to the next whitespace) → `<tmp>`;
    mkstemp names (`tmp` + 8 of `[a-z0-9_]`) → `<tmp>`; UUIDs → `<id>`; `0x…` hex → `<hex>`;
    bare hex runs of 7+ characters holding a digit and a letter a-f (commit ids, object ids)
    → `<hex>`; every remaining run of digits → `#` (line numbers, pids, ports, durations,
    timestamps). Whitespace runs collapse to one space and the ends are stripped; case is kept.
    None or blank text is "" (no error)."""
    if not text:
        return ""
    masked = _TEMP_PATH.sub("<tmp>", text)
    masked = _TEMP_NAME.sub("<tmp>", masked)
    masked = _UUID.sub("<id>", masked)
    masked = _HEX_PREFIXED.sub("<hex>", masked)
    masked = _HEX_ID.sub("<hex>", masked)
    masked = _DIGITS.sub("#", masked)
    return _SPACE.sub(" ", masked).strip()


def _threshold(name: str, value: int) -> int:
    """A threshold below 1 would open the breaker before anything happened."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ClavainError(f"breaker threshold {name} must be a whole number ≥ 1, got {value!r}")
    return value


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _fresh() -> dict[str, Any]:
    return {"version": FORMAT_VERSION, "state": CLOSED, "counts": dict.fromkeys(COUNTS, 0),
            "error_digest": None, "error_excerpt": None, "probing": False, "opened_at": None,
            "reason": None, "history": []}


def _valid_history_entry(entry: Any) -> bool:
    return (isinstance(entry, dict) and is_time(entry.get("at"))
            and entry.get("from") in STATES and entry.get("to") in STATES
            and isinstance(entry.get("reason"), str))


def _valid(data: dict[str, Any]) -> bool:
    """Every field the breaker relies on is there and of the right kind: anything less is a
    damaged file, and a half-trusted file could leave the breaker stuck or silently open."""
    counts = data.get("counts")
    return (data.get("version") == FORMAT_VERSION and data.get("state") in STATES
            and isinstance(counts, dict) and all(_is_count(counts.get(c)) for c in COUNTS)
            and isinstance(data.get("error_digest"), (str, type(None)))
            and isinstance(data.get("error_excerpt"), (str, type(None)))
            and isinstance(data.get("probing"), bool)
            and (is_time(data.get("opened_at")) or
                 (data.get("opened_at") is None and data.get("state") != OPEN))
            and isinstance(data.get("reason"), (str, type(None)))
            and isinstance(data.get("history"), list)
            and all(_valid_history_entry(entry) for entry in data["history"]))


def _load(path: Path, now: float) -> tuple[dict[str, Any], bool]:
    """The saved state, or a fresh one when the file is missing or damaged; and whether its
    opening was stamped in the future (the clock went back): it then counts from now, or the
    cooldown would never end."""
    data = read_json_object(path)
    if data is None or not _valid(data):
        return _fresh(), False
    data["counts"] = {name: data["counts"][name] for name in COUNTS}
    data["history"] = data["history"][-HISTORY_LIMIT:]
    future = data["opened_at"] is not None and data["opened_at"] > now
    if future:
        data["opened_at"] = now
    return data, future


class CircuitBreaker:
    """See the module docstring. `clock` is injected so tests never sleep."""

    def __init__(self, path: Path, *, state_root: Path, no_progress: int = 3,
                 same_error: int = 5, permission_denials: int = 2,
                 cooldown_seconds: float = 1800,
                 clock: Callable[[], float] = time.time) -> None:
        self.path = Path(path)
        self.state_root = Path(state_root)
        if not self.path.is_relative_to(self.state_root):
            raise ClavainError(f"breaker state file {self.path} is not inside the state folder "
                               f"{self.state_root}")
        self.thresholds = {"no_progress": _threshold("no_progress", no_progress),
                           "same_error": _threshold("same_error", same_error),
                           "permission_denials": _threshold("permission_denials",
                                                            permission_denials)}
        if not is_time(cooldown_seconds) or cooldown_seconds < 0:
            raise ClavainError(f"breaker cooldown_seconds must be a number ≥ 0, "
                               f"got {cooldown_seconds!r}")
        self.cooldown_seconds = float(cooldown_seconds)
        self._clock = clock
        self._holding = False  # inside `_locked()`
        self._data = _load(self.path, clock())[0]

    @property
    def state(self) -> str:
        """The saved state, read now (another loop of the task, or a person, may have moved
        it); an OPEN breaker whose cooldown has passed stays OPEN here until `allows()` (or
        `record()`) moves it to its probe."""
        self._reload()
        return self._data["state"]

    def allows(self) -> bool:
        """Whether the loop may start an iteration now; past the cooldown this moves OPEN to a
        HALF_OPEN probe (one iteration) and records it."""
        if self.state != OPEN:  # (nothing to write: a fresh project stays untouched)
            return True
        with self._locked():
            if self._data["state"] != OPEN:
                return True
            if not self._start_probe_if_due():
                return False
            self._save()
            return True

    def record(self, *, progress: bool, error: str | None = None,
               permission_denials: int = 0) -> str:
        """Count one finished iteration and return the new state. An iteration recorded while
        OPEN (its caller skipped `allows()`) updates the counts but cannot close the breaker."""
        if not _is_count(permission_denials):
            raise ClavainError(f"permission_denials must be a whole number ≥ 0, "
                               f"got {permission_denials!r}")
        with self._locked():
            self._start_probe_if_due()
            self._count(bool(progress), error, permission_denials)
            self._settle(bool(progress))
            self._save()
            return self._data["state"]

    def reset(self, reason: str = "reset by a person") -> None:
        """Back to CLOSED with every count at zero: a person looked and decided to go on."""
        with self._locked():
            self._data.update(counts=dict.fromkeys(COUNTS, 0), error_digest=None,
                              error_excerpt=None)
            self._close(reason)
            self._save()

    def status(self) -> dict[str, Any]:
        """What `clavain loop status` shows: state, counts, thresholds, when it opened and until
        when it refuses, why it is not CLOSED, and the last transitions."""
        self._reload()
        data = self._data
        open_now = data["state"] == OPEN
        return {"state": data["state"], **data["counts"], "thresholds": dict(self.thresholds),
                "cooldown_seconds": self.cooldown_seconds, "probing": data["probing"],
                "opened_at": data["opened_at"],
                "cooldown_until": data["opened_at"] + self.cooldown_seconds if open_now else None,
                "reason": data["reason"], "history": [dict(e) for e in data["history"]]}

    # -- counting --------------------------------------------------------------------------

    def _count(self, progress: bool, error: str | None, denials: int) -> None:
        counts = self._data["counts"]
        counts["no_progress"] = 0 if progress else counts["no_progress"] + 1
        # A denial in an iteration that still moved the work is the host doing its job.
        counts["permission_denials"] = (counts["permission_denials"] + 1
                                        if denials and not progress else 0)
        signature = normalise_error(error)
        digest = hashlib.sha256(signature.encode()).hexdigest() if signature else None
        if digest is None:
            counts["same_error"] = 0
        elif digest == self._data["error_digest"]:
            counts["same_error"] += 1
        else:
            counts["same_error"] = 1
        self._data["error_digest"] = digest
        self._data["error_excerpt"] = signature[:EXCERPT_CHARS] or None

    def _reached(self, margin: int) -> str | None:
        """The first count at its threshold less `margin` (0: opens, 1: warns), never at 0."""
        counts = self._data["counts"]
        for name in COUNTS:
            if counts[name] >= max(1, self.thresholds[name] - margin):
                return name
        return None

    def _describe(self, name: str) -> str:
        count = self._data["counts"][name]
        if name == "no_progress":
            return f"{count} iterations in a row with no progress"
        if name == "permission_denials":
            return f"{count} iterations in a row hit permission denials"
        return (f"{count} iterations in a row ended with the same error: "
                f"{self._data['error_excerpt']}")

    def _settle(self, progress: bool) -> None:
        """Move the state after an iteration's counts were updated."""
        tripped, warned = self._reached(0), self._reached(1)
        state = self._data["state"]
        if state == OPEN:
            return
        if self._data["probing"]:
            if progress and warned is None:
                self._close("the probe after the cooldown made progress")
            else:
                self._open(self._describe(warned) if progress and warned
                           else "the probe after the cooldown made no progress")
        elif tripped is not None:
            self._open(self._describe(tripped))
        elif warned is not None:
            warning = f"warning: {self._describe(warned)}; one more opens the breaker"
            if state == CLOSED:
                self._move(HALF_OPEN, warning)
            self._data["reason"] = warning
        elif state == HALF_OPEN and progress:
            self._close("an iteration made progress with no repeated error or denial")

    # -- transitions -----------------------------------------------------------------------

    def _start_probe_if_due(self) -> bool:
        """OPEN past its cooldown → HALF_OPEN probe; the reason it opened is kept."""
        if self._data["state"] != OPEN or \
                self._clock() < self._data["opened_at"] + self.cooldown_seconds:
            return False
        self._move(HALF_OPEN, f"cooldown of {self.cooldown_seconds:g}s passed; "
                              "one probe iteration allowed")
        self._data["probing"] = True
        return True

    def _open(self, reason: str) -> None:
        self._move(OPEN, reason)
        self._data.update(opened_at=self._clock(), reason=reason, probing=False)

    def _close(self, reason: str) -> None:
        self._move(CLOSED, reason)
        self._data.update(opened_at=None, reason=None, probing=False)

    def _move(self, to: str, reason: str) -> None:
        history = self._data["history"]
        history.append({"at": self._clock(), "from": self._data["state"], "to": to,
                        "reason": reason})
        del history[:-HISTORY_LIMIT]
        self._data["state"] = to

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """The file's lock for one read-modify-write, the state read afresh inside it."""
        with locked(self.state_root, self.path):
            self._holding = True
            try:
                self._reload()
                yield
            finally:
                self._holding = False

    def _reload(self) -> None:
        self._data, future = _load(self.path, self._clock())
        if not future:
            return
        # Saved at once, so the cooldown counts from this moment for every later read.
        with contextlib.suppress(OSError):  # read-only: counted from now at each read
            if self._holding:
                self._save()
            else:
                with self._locked():
                    self._save()

    def _save(self) -> None:
        write_json_atomic(self.path, self._data, inside=self.state_root)
