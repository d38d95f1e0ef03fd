"""Workgraph figures: bulk insert, next+claim latency by graph size, multi-process claim rate,
snapshot export. Prints numbers; asserts nothing.

    .venv/bin/python benchmarks/graph_bench.py [--sizes 1000,10000,100000] [--workers 16]
    .venv/bin/python benchmarks/graph_bench.py --db postgresql://user@host:port/db
    .venv/bin/python benchmarks/graph_bench.py --db throwaway   (a temporary local server)

With --db, the claim figures are measured on that PostgreSQL server and on SQLite, side by
side (each graph in a schema of its own, dropped afterwards); the 16 claiming processes each
work from a project folder of their own, as supervisors on several machines would.

Targets (issue 3): next+claim p50 <= 2 ms at 100k nodes; >= 1,000 claims/s with 16 processes.
Issue 19: >= 2,000 claims/s with 16 processes on PostgreSQL over loopback.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LIB = Path(__file__).resolve().parents[1] / "lib"
sys.path.insert(0, str(LIB))

from clavain.paths import StatePaths  # noqa: E402
from clavain.store.graph_db import open_graph_db  # noqa: E402
from clavain.store.placeholders import to_psycopg  # noqa: E402
from clavain.workgraph import edits, export, results  # noqa: E402
from clavain.workgraph.claims import claim_next  # noqa: E402
from clavain.workgraph.graphs import DEFAULT_GRAPH, Graph  # noqa: E402

_WORKER = """
import json, os, sys, time
from pathlib import Path
from clavain.paths import StatePaths
from clavain.workgraph.claims import claim_next
from clavain.workgraph.graphs import DEFAULT_GRAPH, Graph
from clavain.store.graph_db import open_graph_db
state = StatePaths(Path(sys.argv[1]), store_url=sys.argv[4] or None)
g = Graph(open_graph_db(state), DEFAULT_GRAPH, state)
go = Path(sys.argv[3])
while not go.exists():
    time.sleep(0.001)
n = 0
for _ in range(int(sys.argv[2])):
    if claim_next(g, run_id=f"w{os.getpid()}", pid=os.getpid(), lease_seconds=3600) is None:
        break
    n += 1
print(json.dumps({"claims": n, "end": time.time()}))
"""


def realistic_specs(count: int, seed: int = 7) -> list[dict]:
    """Tasks with up to two deps on recent earlier nodes, a verify per ten, plans on top."""
    rng = random.Random(seed)
    specs = []
    for i in range(count):
        kind = "plan" if i % 100 == 0 else "verify" if i % 10 == 9 else "task"
        deps = sorted({f"n{rng.randrange(max(0, i - 50), i):06d}" for _ in range(rng.randint(0, 2))}
                      ) if i else []
        specs.append({"id": f"n{i:06d}", "type": kind, "dependsOn": deps, "title": f"node {i}"})
    return specs


class Stores:
    """Where each benchmark graph lives: a new SQLite file, or a new schema on the server."""

    def __init__(self, server_url: str | None) -> None:
        self.server_url = server_url
        self.schemas: list[str] = []

    def url(self, name: str) -> str | None:
        if self.server_url is None:
            return None
        import psycopg

        schema = f"bench_{os.getpid()}_{len(self.schemas)}_{name}".lower()
        with psycopg.connect(self.server_url, autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA {schema}")
        self.schemas.append(schema)
        sep = "&" if "?" in self.server_url else "?"
        return f"{self.server_url}{sep}options=-csearch_path%3D{schema}"

    def drop(self) -> None:
        if self.server_url is None or not self.schemas:
            return
        import psycopg

        with psycopg.connect(self.server_url, autocommit=True) as conn:
            for schema in self.schemas:
                conn.execute(f"DROP SCHEMA {schema} CASCADE")


SQLITE = Stores(None)


def build(folder: Path, count: int, stores: Stores = SQLITE) -> tuple[Graph, float]:
    """The default graph of a new project holding `count` nodes, and how long adding took."""
    state = StatePaths(folder / ".clavain", store_url=stores.url(folder.name))
    state.root.mkdir(parents=True, exist_ok=True)
    g = Graph(open_graph_db(state), DEFAULT_GRAPH, state)
    start = time.perf_counter()
    edits.add_nodes(g, realistic_specs(count))
    return g, time.perf_counter() - start


def claim_latency(g: Graph, samples: int) -> list[float]:
    """Claim then finish each node, so readiness keeps moving through the graph."""
    times = []
    for _ in range(samples):
        start = time.perf_counter()
        node = claim_next(g, run_id="bench", pid=os.getpid(), lease_seconds=3600)
        times.append(time.perf_counter() - start)
        if node is None:
            break
        done = ("UPDATE nodes SET status = 'done', lock_run_id = NULL "
                "WHERE graph_id = ? AND id = ?")
        if g.conn.dialect != "sqlite":  # the benchmark's own statement, in psycopg's form
            done = to_psycopg(done)
        g.conn.execute(done, (g.id, node["id"]))
    return times


def apply_latency(folder: Path, count: int, samples: int, lag: float) -> list[float]:
    """apply_result (claim first, outside the timing) on a graph of `count` nodes, with the
    snapshot allowed to lag `lag` seconds (0: rewritten after every change, the old rule)."""
    g, _ = build(folder, count)
    g.state.config.write_text(json.dumps({"defaults": {"snapshotMaxLagSeconds": lag}}))
    times = []
    for _ in range(samples):
        node = claim_next(g, run_id="bench", lease_seconds=3600)
        if node is None:
            break
        start = time.perf_counter()
        results.apply_result(g, node["id"], {"status": "success", "summary": "ok"},
                             run_id="bench")
        times.append(time.perf_counter() - start)
    g.conn.close()
    return times


def claim_rate(folder: Path, workers: int, per_worker: int,
               stores: Stores = SQLITE) -> tuple[int, float]:
    url = stores.url(folder.name)
    state = StatePaths(folder / ".clavain", store_url=url)
    state.root.mkdir(parents=True, exist_ok=True)
    g = Graph(open_graph_db(state), DEFAULT_GRAPH, state)
    edits.add_nodes(g, [{"id": f"r{i:06d}", "type": "task"}
                        for i in range(workers * per_worker)])
    g.conn.close()
    go = folder / "go"
    env = {**os.environ, "PYTHONPATH": str(LIB)}
    # With a server, every process works from a project folder of its own (one per machine);
    # with SQLite they share the one file, the only way SQLite can share a graph.
    roots = ([folder / f"machine-{i}" / ".clavain" for i in range(workers)] if url
             else [state.root] * workers)
    procs = [subprocess.Popen([sys.executable, "-c", _WORKER, str(root), str(per_worker),
                               str(go), url or ""], stdout=subprocess.PIPE, text=True, env=env)
             for root in roots]
    time.sleep(1.5)  # let every worker import and connect before the start signal
    start = time.time()
    go.touch()
    reports = [json.loads(p.communicate()[0]) for p in procs]
    return sum(r["claims"] for r in reports), max(r["end"] for r in reports) - start


def claim_figures(root: Path, stores: Stores, sizes: list[int], samples: int, workers: int,
                  per_worker: int) -> dict[str, str]:
    """next+claim latency per size and the multi-process claim rate, on one backend."""
    figures = {}
    for size in sizes:
        g, took = build(root / f"g{size}", size, stores)
        times = sorted(claim_latency(g, samples))
        p50 = statistics.median(times) * 1000
        p95 = times[int(len(times) * 0.95) - 1] * 1000
        figures[f"insert {size:,} nodes"] = f"{took:.2f} s ({size / took:,.0f} nodes/s)"
        figures[f"next+claim p50 at {size:,}"] = f"{p50:.3f} ms (p95 {p95:.3f} ms)"
        g.conn.close()
    claims, wall = claim_rate(root / "rate", workers, per_worker, stores)
    figures[f"claims/s, {workers} processes"] = (f"{claims / wall:,.0f} ({claims} claims in "
                                                 f"{wall:.2f} s)")
    return figures


def compare(server_url: str, args: argparse.Namespace, sizes: list[int]) -> None:
    stores = Stores(server_url)
    with tempfile.TemporaryDirectory() as tmp:
        try:
            sqlite = claim_figures(Path(tmp) / "sqlite", SQLITE, sizes, args.samples,
                                   args.workers, args.claims_per_worker)
            shared = claim_figures(Path(tmp) / "pg", stores, sizes, args.samples,
                                   args.workers, args.claims_per_worker)
        finally:
            stores.drop()
    width = max(len(key) for key in sqlite)
    print(f"{'figure':<{width}}  {'SQLite (one file)':<34}  PostgreSQL ({_redacted(server_url)})")
    for key in sqlite:
        print(f"{key:<{width}}  {sqlite[key]:<34}  {shared[key]}")
    print(f"(cpus: {os.cpu_count()}; server on loopback)")


def _redacted(url: str) -> str:
    from clavain.store.postgres import redact

    return redact(url)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--claims-per-worker", type=int, default=500)
    parser.add_argument("--snapshot-size", type=int, default=10000)
    parser.add_argument("--db", metavar="URL", help="a PostgreSQL URL (or `throwaway`): claim "
                        "figures on it beside SQLite's")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.db:
        cluster = None
        url = args.db
        if args.db == "throwaway":
            sys.path.insert(0, str(LIB.parent))
            from tests.pgserver import Cluster

            cluster = Cluster().start()
            url = cluster.url()
        try:
            compare(url, args, sizes)
        finally:
            if cluster is not None:
                cluster.destroy()
        return

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for size in sizes:
            g, took = build(root / f"g{size}", size)
            times = sorted(claim_latency(g, args.samples))
            p50 = statistics.median(times) * 1000
            p95 = times[int(len(times) * 0.95) - 1] * 1000
            print(f"{size:>7} nodes: insert {took:6.2f} s ({size / took:8.0f} nodes/s); "
                  f"next+claim p50 {p50:.3f} ms, p95 {p95:.3f} ms")
            g.conn.close()

        g, _ = build(root / "snap", args.snapshot_size)
        runs = []
        for _ in range(5):
            start = time.perf_counter()
            export.write_snapshot(g.conn, g.state)
            runs.append(time.perf_counter() - start)
        size_kb = g.state.workgraph_json.stat().st_size / 1024
        print(f"snapshot export at {args.snapshot_size} nodes: p50 "
              f"{statistics.median(runs) * 1000:.1f} ms ({size_kb:.0f} KiB)")
        start = time.perf_counter()
        export.mermaid(g)
        took = (time.perf_counter() - start) * 1000
        print(f"mermaid at {args.snapshot_size} nodes: {took:.1f} ms")
        g.conn.close()

        for lag, label in ((1.0, "snapshot lags <= 1 s (default)"),
                           (0.0, "snapshot after every change (before)")):
            times = sorted(apply_latency(root / f"apply-{lag}", args.snapshot_size, 100, lag))
            print(f"apply_result at {args.snapshot_size} nodes, {label}: p50 "
                  f"{statistics.median(times) * 1000:.2f} ms, "
                  f"p95 {times[int(len(times) * 0.95) - 1] * 1000:.2f} ms")

        claims, wall = claim_rate(root / "rate", args.workers, args.claims_per_worker)
        print(f"{args.workers} processes: {claims} claims in {wall:.2f} s = "
              f"{claims / wall:,.0f} claims/s (cpus: {os.cpu_count()})")


if __name__ == "__main__":
    main()
