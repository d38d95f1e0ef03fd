"""The three-task plan that the supervisor's e2e test and `benchmarks/fast_profile.py` both
drive through the real `claude -p`: a planner adds three independent tasks, each executor
writes its file with one Bash call. Shared so the benchmark keeps measuring what the test
proves."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from typing import Any

from tests.e2e.scripted_model import assistant_turns, bash, text, tool_results

TASKS = ("one", "two", "three")
PACKET_HEADER = re.compile(r"# Clavain ([a-z][a-z -]*?)(?: — node (\S+))?\n")
PLAN_RESULT = {"status": "success", "summary": "3 tasks", "next": {"addNodes": [
    {"id": f"task-{name}", "type": "task", "title": f"write {name}.txt",
     "ownership": [f"{name}.txt"], "verify": [f"grep -qx {name} {name}.txt"]}
    for name in TASKS]}}


def packet_block(request: dict[str, Any]) -> tuple[str, str, str]:
    """(role, node, packet text) from the Clavain packet in the conversation's first user
    message, e.g. ("executor", "task-one", "# Clavain executor — node task-one …"); empty
    strings when it holds none."""
    for message in request.get("messages", ()):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        texts = [content] if isinstance(content, str) else [
            block.get("text", "") for block in content or ()
            if isinstance(block, dict) and block.get("type") == "text"]
        for chunk in texts:
            found = PACKET_HEADER.search(chunk + "\n")
            if found:
                return found.group(1).strip(), found.group(2) or "", chunk[found.start():]
        return "", "", ""
    return "", "", ""


def executor_reply(request: dict[str, Any], node: str, turn: int) -> list[Any] | None:
    """An executor's turns: write `<name>.txt`, then report success."""
    name = node.removeprefix("task-")
    if turn == 0:
        return [bash(f"printf '{name}\\n' > {name}.txt", f"Write {name}.txt")]
    if tool_results(request):
        return [text(f"Wrote {name}.txt.\n\n<result>"
                     f'{{"status":"success","summary":"wrote {name}.txt"}}</result>')]
    return None


def scenario_script(seen: list[tuple[str, str, int]],
                    reply: Callable[[dict[str, Any], str, int], list[Any] | None]
                    = executor_reply):
    """The scripted model for the plan: the planner adds the three tasks, each executor's
    turns come from `reply`; every (role, node, turn) asked is appended to `seen`."""
    lock = threading.Lock()

    def script(request: dict[str, Any]):
        role, node, _packet = packet_block(request)
        turn = assistant_turns(request)
        with lock:
            seen.append((role, node, turn))
        if role == "planner" and node == "plan-greeter":
            return [text("Three independent files.\n\n"
                         f"<result>{json.dumps(PLAN_RESULT)}</result>")]
        if role == "executor" and node.startswith("task-"):
            return reply(request, node, turn)
        return None

    return script
