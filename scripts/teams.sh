#!/usr/bin/env bash
# A team's supervisors on one shared workgraph: four project folders (four "machines"), each
# with CLAVAIN_DB pointing at one PostgreSQL server, drain one graph together with
# `clavain run`, and the script checks that no node was claimed twice.
#   scripts/teams.sh                              (a throwaway local server, removed after)
#   scripts/teams.sh postgresql://user@host/db    (your server: a new graph named team-<time>)
# Needs psycopg (pip install -e '.[postgres]') and, without a URL, Debian's postgresql package.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
if [ -z "${CLAVAIN:-}" ]; then
  if [ -x "$repo/.venv/bin/clavain" ]; then CLAVAIN=$repo/.venv/bin/clavain; else CLAVAIN=$repo/bin/clavain; fi
fi
python=$(dirname "$CLAVAIN")/python
[ -x "$python" ] || python=python3
work=$(mktemp -d)
server_root=
# shellcheck disable=SC2329  # called by the EXIT trap
cleanup() {
  if [ -n "$server_root" ]; then "$python" "$repo/tests/pgserver.py" stop "$server_root"; fi
  rm -rf "$work"
}
trap cleanup EXIT
if [ -n "${1:-}" ]; then
  url=$1
else
  started=$("$python" "$repo/tests/pgserver.py" start)
  url=$("$python" -c 'import json, sys; print(json.load(sys.stdin)["url"])' <<<"$started")
  server_root=$("$python" -c 'import json, sys; print(json.load(sys.stdin)["root"])' <<<"$started")
  echo "== a throwaway PostgreSQL server at $url"
fi
export CLAVAIN_DB=$url
graph="team-$(date -u +%Y%m%dT%H%M%S)"
machines=4
for i in $(seq 1 "$machines"); do
  folder="$work/machine-$i"
  mkdir -p "$folder"
  git -C "$folder" init -q -b main
  (cd "$folder" && "$CLAVAIN" init >/dev/null)  # git-ignores .clavain/'s machine state
  git -C "$folder" -c user.name=demo -c user.email=demo@localhost add -A
  git -C "$folder" -c user.name=demo -c user.email=demo@localhost commit -qm start
done
# One person plans (from machine 1); every machine sees the same graph at once.
plan="$work/plan.json"
"$python" - "$plan" <<'PY'
import json, sys
tasks = [{"id": f"shard-{i:02d}", "type": "task", "title": f"test shard {i}",
          "commands": ["sleep 0.5"], "verify": ["true"]} for i in range(12)]
json.dump({"nodes": tasks}, open(sys.argv[1], "w"))
PY
(cd "$work/machine-1" && "$CLAVAIN" graph import "$plan" --graph "$graph" >/dev/null \
  && "$CLAVAIN" graph scaffold --graph "$graph" >/dev/null)
echo "== graph $graph: 12 tasks, their 12 verify nodes, integrate, final verify"
echo "== $machines machines run \`clavain run --graph $graph --runner shell --workers 2\` at once"
pids=()
for i in $(seq 1 "$machines"); do
  (cd "$work/machine-$i" && "$CLAVAIN" run --graph "$graph" --runner shell --workers 2 \
    --run-id "machine-$i" >"$work/machine-$i.out" 2>&1) &
  pids+=($!)
done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
for i in $(seq 1 "$machines"); do tail -n 3 "$work/machine-$i.out" | sed "s/^/machine-$i: /"; done
echo
echo "== who ran what (from each machine's .clavain/runs/machine-N/metrics.json)"
"$python" - "$work" "$machines" <<'PY'
import collections, json, sys
from pathlib import Path
work, machines = Path(sys.argv[1]), int(sys.argv[2])
ran = collections.Counter()
for i in range(1, machines + 1):
    metrics = json.loads((work / f"machine-{i}/.clavain/runs/machine-{i}/metrics.json").read_text())
    nodes = [call["node"] for call in metrics["timeline"]]
    ran.update(nodes)
    print(f"machine-{i}: {len(nodes):2d} node(s)  {' '.join(sorted(nodes))}")
twice = [node for node, count in ran.items() if count > 1]
print(f"{sum(ran.values())} runner calls for {len(ran)} nodes; claimed twice: {twice or 'none'}")
sys.exit(1 if twice or len(ran) != 26 else 0)
PY
exit "$status"
