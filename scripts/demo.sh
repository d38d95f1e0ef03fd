#!/usr/bin/env bash
# A real headless sprint on examples/greeter: its plan imported as a workgraph, then
# `clavain run` drives it — tasks, verify nodes, integrate, final verify — and prints the graph
# and the run's report. Tasks use the `shell` runner (their own commands stand in for a model:
# no API key needed); verify nodes use the shell verifier as always.
#   scripts/demo.sh                  (shell runner, two workers in git worktrees)
#   scripts/demo.sh --runner claude  (Claude Code writes the files; needs claude and a key)
#   scripts/demo.sh --loop           (`clavain loop` on examples/loop-demo with a scripted agent:
#                                     iterations, status blocks, the exit gate and the breaker)
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
if [ -z "${CLAVAIN:-}" ]; then
  if [ -x "$repo/.venv/bin/clavain" ]; then CLAVAIN=$repo/.venv/bin/clavain; else CLAVAIN=$repo/bin/clavain; fi
fi
runner=shell
if [ "${1:-}" = "--runner" ] && [ -n "${2:-}" ]; then runner=$2; fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The page outlives the throwaway project: a person opens it after the demo.
if [ "${1:-}" = "--loop" ]; then page_name=clavain-demo-loop.html; else page_name=clavain-demo.html; fi
page=${CLAVAIN_DEMO_PAGE:-${TMPDIR:-/tmp}/$page_name}
if [ "${1:-}" = "--loop" ]; then
  # A fresh git project from examples/loop-demo in $1: three failing checks and ./agent.py,
  # a scripted stand-in for a model, configured as the runners `agent` and `pretender`.
  loop_project() {
    mkdir -p "$1"
    cp -R "$repo/examples/loop-demo/." "$1"
    git -C "$1" init -q .
    git -C "$1" -c user.name=demo -c user.email=demo@localhost add -A
    git -C "$1" -c user.name=demo -c user.email=demo@localhost commit -qm "loop demo: checks fail"
    CLAVAIN_PROJECT_DIR=$1 "$CLAVAIN" init >/dev/null
    cp "$1/clavain-config.json" "$1/.clavain/config.json"
  }
  loop_project "$work/honest"
  cd "$work/honest"
  export CLAVAIN_PROJECT_DIR=$work/honest
  echo "== the checks in .clavain/config.json (all failing), and the first prompt: clavain iterate"
  "$CLAVAIN" iterate
  echo
  echo "== clavain loop --runner agent (./agent.py, scripted: no API key, no network)"
  "$CLAVAIN" loop --runner agent --run-id loop-demo 2>&1
  echo
  echo "== the reply of iteration 1, ending with the status block the loop read"
  cat .clavain/runs/loop-demo/iteration-1/stdout.log
  echo
  # The breaker is kept per loop task across runs, so this part gets a project of its own.
  loop_project "$work/pretend"
  cd "$work/pretend"
  export CLAVAIN_PROJECT_DIR=$work/pretend
  echo "== clavain loop --runner pretender (./agent.py --pretend: says COMPLETE and EXIT_SIGNAL: true, changes nothing)"
  code=0
  "$CLAVAIN" loop --runner pretender --run-id loop-pretend 2>&1 || code=$?
  echo "(exit $code: the checks still fail, so EXIT_SIGNAL: true was not believed; no progress opened the breaker)"
  [ "$code" -eq 3 ] || { echo "demo: expected exit 3 (breaker open), got $code" >&2; exit 1; }
  echo
  echo "== a new run of the same task, even with the honest agent, is refused until a person closes the breaker"
  code=0
  "$CLAVAIN" loop --runner agent --run-id loop-again 2>&1 || code=$?
  echo "(exit $code)"
  [ "$code" -eq 3 ] || { echo "demo: expected exit 3 (breaker open), got $code" >&2; exit 1; }
  "$CLAVAIN" loop --circuit-status --run loop-again
  echo
  echo "== the page of the honest run: iterations, status blocks, progress, the breaker"
  cd "$work/honest"
  CLAVAIN_PROJECT_DIR=$work/honest "$CLAVAIN" report --html "$page" --run loop-demo
  exit 0
fi
cp -R "$repo/examples/greeter/." "$work"
cd "$work"
git init -q .
git -c user.name=demo -c user.email=demo@localhost add -A
git -c user.name=demo -c user.email=demo@localhost commit -qm "greeter: tests, no code yet"
export CLAVAIN_PROJECT_DIR=$work
# Nothing to commit after it: init's ignores go to .git/info/exclude, so the parallel run below
# starts on the tree as it is.
"$CLAVAIN" init >/dev/null
# The snapshot written at once: no deferred writer outlives this throwaway folder.
printf '{"defaults": {"snapshotMaxLagSeconds": 0}}\n' > .clavain/config.json
"$CLAVAIN" graph import plan.json >/dev/null
"$CLAVAIN" graph scaffold >/dev/null
echo "== plan (runner: $runner$([ "$runner" = shell ] && echo ', no API key needed'))"
"$CLAVAIN" run --dry-run --runner "$runner"
echo
echo "== run"
"$CLAVAIN" run --runner "$runner" --workers 2 --run-id demo --html "$page"
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
echo
echo "== the page: the graph, the two workers side by side on the timeline, the budgets"
echo "open $page in a browser (or: file://$page)"
