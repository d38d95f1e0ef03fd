"""What a person sees of a headless loop: one line per iteration (the items offered, then what
the agent reported and whether it moved anything — a claim nothing backs is shown as a claim),
the breaker's state when it changes, items set aside as BLOCKED, and a countdown while the loop
waits (calls per hour, a usage limit)."""

from __future__ import annotations

from typing import Any, TextIO

from clavain.supervisor.progress import LinePrinter


class Printer(LinePrinter):
    def __init__(self, stream: TextIO) -> None:
        super().__init__(stream)
        self.breaker = "CLOSED"

    def line(self, event: dict[str, Any]) -> str | None:
        kind = event["event"]
        if kind == "start":
            return (f"clavain loop {event['run_id']} ({event['runner']}, automation "
                    f"{event['automation']}, at most {event['max_iterations']} iterations)")
        if kind == "iteration":
            items = ", ".join(event["items"]) or "nothing actionable: asking to confirm exit"
            return f"#{event['number']} offered: {items}"
        if kind == "iterated":
            return self._iterated(event)
        if kind == "blocked":
            return f"  ⏸ {event['item']} BLOCKED, left for a person: {event['why']}"
        if kind == "waiting":
            if not self.wait_line_due():
                return None
            return f"⏳ waiting {event['seconds_left']:.0f}s ({event['why']})"
        return None

    def _iterated(self, event: dict[str, Any]) -> str:
        status = event.get("status")
        said = (f"{status['status']} {status['task_completed'] or '-'}, exit "
                f"{'yes' if status['exit_signal'] else 'no'}" if status
                else event.get("runner_error") or event.get("status_error") or "no status")
        moved = ", ".join(event["progress"]["why"]) or "no progress"
        claims = event["progress"].get("unconfirmed") or []
        if claims:  # the agent's word, shown as such
            moved += f" (claimed, not seen: {'; '.join(claims)})"
        line = f"  → {said}; {moved}"
        if event["breaker"] != self.breaker:
            line += f"; breaker {self.breaker} → {event['breaker']}"
            self.breaker = event["breaker"]
        return line
