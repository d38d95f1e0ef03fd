#!/usr/bin/env bash
# A real headless sprint on examples/greeter: its plan imported as a workgraph, then
# `clavain run` drives it — tasks, verify nodes, integrate, final verify — and prints the graph
# and the run's report. Tasks use the `shell` runner (their own commands stand in for a model:
# no API key needed); verify nodes use the shell verifier as always.
#   scripts/demo.sh                  (shell runner, two workers in git worktrees)
#   scripts/demo.sh --runner claude  (Claude Code writes the files; needs claude and a key)
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
if [ -z "${CLAVAIN:-}" ]; then
  if [ -x "$repo/.venv/bin/clavain" ]; then CLAVAIN=$repo/.venv/bin/clavain; else CLAVAIN=$repo/bin/clavain; fi
fi
runner=shell
if [ "${1:-}" = "--runner" ] && [ -n "${2:-}" ]; then runner=$2; fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -R "$repo/examples/greeter/." "$work"
cd "$work"
git init -q .
git -c user.name=demo -c user.email=demo@localhost add -A
git -c user.name=demo -c user.email=demo@localhost commit -qm "greeter: tests, no code yet"
export CLAVAIN_PROJECT_DIR=$work
"$CLAVAIN" init >/dev/null
# A parallel run starts from the last commit: init's .gitignore block is committed first.
git -c user.name=demo -c user.email=demo@localhost add .gitignore
git -c user.name=demo -c user.email=demo@localhost commit -qm "clavain init"
# The snapshot written at once: no deferred writer outlives this throwaway folder.
printf '{"defaults": {"snapshotMaxLagSeconds": 0}}\n' > .clavain/config.json
"$CLAVAIN" graph import plan.json >/dev/null
"$CLAVAIN" graph scaffold >/dev/null
echo "== plan (runner: $runner$([ "$runner" = shell ] && echo ', no API key needed'))"
"$CLAVAIN" run --dry-run --runner "$runner"
echo
echo "== run"
"$CLAVAIN" run --runner "$runner" --workers 2 --run-id demo
echo
echo "== graph"
"$CLAVAIN" graph mermaid
echo
echo "== report"
"$CLAVAIN" report --run demo
echo
echo "== the code the run merged"
git log --oneline | head -8
python3 -m greeter.cli Ada
