#!/usr/bin/env bash
# A small workgraph run end to end with no LLM: two tasks, their scaffolding, claims, results
# and the shell verifier, in a throwaway git repo. Prints the graph at the end.
#   scripts/demo.sh            (uses .venv/bin/clavain when present, else bin/clavain)
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
if [ -z "${CLAVAIN:-}" ]; then
  if [ -x "$repo/.venv/bin/clavain" ]; then CLAVAIN=$repo/.venv/bin/clavain; else CLAVAIN=$repo/bin/clavain; fi
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
git init -q .
export CLAVAIN_PROJECT_DIR=$work CLAVAIN_RUN_ID=demo-run
"$CLAVAIN" init
# The snapshot written at once: no deferred writer outlives this throwaway folder.
printf '{"defaults": {"snapshotMaxLagSeconds": 0}}\n' > .clavain/config.json
cat > plan.json <<'JSON'
{"nodes": [
  {"id": "task-greet", "type": "task", "title": "write greet.sh",
   "verify": ["test -x greet.sh", "./greet.sh | grep -q hello"]},
  {"id": "task-docs", "type": "task", "title": "document greet.sh", "dependsOn": ["task-greet"],
   "verify": ["grep -q greet README.md"]}
]}
JSON
"$CLAVAIN" graph import plan.json
"$CLAVAIN" graph scaffold
# The "executor" for each task is this script itself; verify nodes run in the shell verifier.
while step=$("$CLAVAIN" graph next --claim --json); do
  read -r id type < <(printf '%s' "$step" \
    | python3 -c 'import json, sys; n = json.load(sys.stdin)["node"]; print(n["id"], n["type"])')
  case "$type" in
    verify|final_verify) "$CLAVAIN" verify "$id" >/dev/null || true ;;
    *)
      case "$id" in
        task-greet) printf '#!/bin/sh\necho hello\n' > greet.sh && chmod +x greet.sh ;;
        task-docs) echo "Run ./greet.sh to greet." > README.md ;;
      esac
      echo "<result>{\"status\":\"success\",\"summary\":\"$id done\"}</result>" \
        | "$CLAVAIN" graph apply "$id" --result - >/dev/null ;;
  esac
  echo "ran $id ($type)"
done
"$CLAVAIN" graph ls
"$CLAVAIN" graph mermaid
