"""The node columns a claim writes and what giving it back clears: one text for every statement
that takes, releases, finishes, answers, reopens or cancels a node, so none can leave part of an
old claim behind (a runner pid judged later, a lease another machine honours).

The claim's columns: who holds it (`lock_run_id`, `lock_pid` and `lock_host` of the claimer),
since when (`lock_started_at`, renewed in `lock_renewed_at`), for how long (`lock_lease_ms`, the
claimer's own lease), under which generation (`lock_generation`, the fence; never cleared), and
the runner process group working it (`lock_runner_pid`, `lock_runner_identity`).
"""

# Parameters :run_id, :now, :pid, :host, :lease_ms. Every claim adds one to the generation.
LOCK_SET = """SET status = 'in_progress', lock_run_id = :run_id, lock_started_at = :now,
      lock_renewed_at = :now, lock_pid = :pid, lock_host = :host, lock_lease_ms = :lease_ms,
      lock_runner_pid = NULL, lock_runner_identity = NULL, updated_at = :now,
      lock_generation = lock_generation + 1"""

LOCK_CLEARED = ("lock_run_id = NULL, lock_started_at = NULL, lock_renewed_at = NULL, "
                "lock_pid = NULL, lock_host = NULL, lock_lease_ms = NULL, "
                "lock_runner_pid = NULL, lock_runner_identity = NULL")
