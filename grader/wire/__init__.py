"""The messages between the three processes — grader, judge, learner process — and how they travel.

Imported by every process and importing nothing else of the grader (grader/layout.py): typed
messages (messages.py), their JSON codec (codec.py) and framing (framing.py), the judge's
signed channel (signed.py), tensors and arrays as plain data (values.py: torch and numpy, for the
two processes that have them), and the IPython syntax a learner's source text holds (ipython.py).
"""
