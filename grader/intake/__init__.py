"""What the grader reads of a submission before any sandbox exists: the loader that cuts a
learner's files into cells (submission.py) and a batch's learners and hashes (discover.py).
No learner code runs here.
"""
