"""Accelerators emulated on the CPU, for a machine without the learner's GPU: the stand-ins
(standin.py) and the patching that makes torch answer as they do (patching.py).

Runs in the learner process only, beside the learner's code: nothing here is trusted by the
judge, which checks every value from plain data (grader/wire/values.py).
"""
