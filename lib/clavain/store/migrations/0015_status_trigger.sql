-- The dependents' counts move only when a node goes into or out of done or failed: a claim
-- (open → in_progress) or a give-back must not touch them at all. And the dependents are found
-- through deps_depends_on: without statistics SQLite read the whole graph's edges through the
-- primary key instead (a claim cost ~6 ms at 100,000 nodes instead of ~0.1 ms), so the claim
-- was not flat in the graph's size. PostgreSQL's trigger already fires only then.
DROP TRIGGER deps_count_status;

CREATE TRIGGER deps_count_status AFTER UPDATE OF status ON nodes
WHEN OLD.status <> NEW.status
  AND (OLD.status IN ('done', 'failed') OR NEW.status IN ('done', 'failed'))
BEGIN
  UPDATE nodes SET unmet_deps = unmet_deps + (
      SELECT (OLD.status = 'done' OR (e.kind = 'settled' AND OLD.status = 'failed'))
           - (NEW.status = 'done' OR (e.kind = 'settled' AND NEW.status = 'failed'))
      FROM deps e INDEXED BY deps_depends_on
      WHERE e.graph_id = NEW.graph_id AND e.depends_on_id = NEW.id AND e.node_id = nodes.id)
  WHERE graph_id = NEW.graph_id
    AND id IN (SELECT node_id FROM deps INDEXED BY deps_depends_on
               WHERE graph_id = NEW.graph_id AND depends_on_id = NEW.id);
END;
