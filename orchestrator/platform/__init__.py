"""The platform's other asynchronous surfaces, beyond one job or build id.

- ``execution_model``: which row of the platform's decision table a function
  key falls in (a pure join of the catalog reads), with contradictions.
- ``discovery``: reading those inputs from a workspace.
- ``occurrences``: a function schedule's finished occurrences from its jobs and
  runs (pure; ``kinds/schedule.py`` follows kind ``schedule`` with it).
- ``run_history``: the Function operations list routes, page by page, and the
  runs (attempts) of a finished function job.
- ``stop_retries``: the administrative retry-chain stop.
- ``cli``: ``orchestrator explain FUNCTION_KEY``.
"""
