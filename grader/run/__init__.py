"""Running a grading: a judge and a learner process per run (sandbox.py), how they start
(launch.py), the learner's isolation (isolation.py, cgroups.py), the end of everything a run
started (reaper.py), what a run's messages mean (blame.py), and a batch's share of the machine
(share.py). Runs in the grader's process.
"""
