"""How a process of a run starts before its role's main runs: fork servers (forkserver.py) and
each child's own confinement — session, limits, namespaces, cgroup, privileges (confine.py).

Runs in the fork servers and in each child; imports only grader/wire/, and a role's main lazily.
"""
