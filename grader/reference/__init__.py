"""The course's trusted definitions, computed the same way in the judge and in the learner process.

The emulated devices' facts (device.py), the problems the checks hand the learner's functions
and the reference computations they are compared with (problems.py), and the live-tensor meter
both sides count memory with (meter.py). Imports only grader/wire/.
"""
