"""The platform's other asynchronous surfaces, beyond one job or build id.

- ``execution_model``: which row of the platform's decision table a function
  key falls in (a pure join of the catalog reads), with contradictions.
- ``discovery``: reading those inputs from a workspace.
- ``occurrences`` / ``schedule_follower``: tracking a function schedule's
  occurrences (kind ``schedule``), one event per finished occurrence.
- ``run_history``: the runs (attempts) of a finished function job.
- ``stop_retries``: the administrative retry-chain stop.
- ``cli``: ``orchestrator explain FUNCTION_KEY``.
"""
