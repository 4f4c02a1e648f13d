"""A Moltaro workspace as the service reaches it: one client per workspace.

Every request goes ``WorkspaceClient`` -> ``WorkspaceGate`` (slots, rate
limit, Retry-After) -> ``Transport`` (``orchestrator.transport``, or a fake in tests), and its
answer is classified into a ``ReadResult`` the same way whoever asked.
"""
