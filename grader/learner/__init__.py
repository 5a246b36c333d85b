"""The learner process: the only process that runs the learner's code (grader/wire/messages.py).

It imports the learner's modules (``toplevel``, ``kernel``), runs the calls the judge asks for
(``runner``, ``calls``) in the device sessions it asks for (``sessions``: the CPU, a real GPU, or
a stand-in from grader/emulation/; ``worlds``: ex1's simulated machines), with ``instruments``
measuring, and answers with plain data (grader/wire/values.py). Nothing here decides a verdict,
and nothing here needs the checks, the course or the texts: an isolated learner process sees
only the layers that run in it (grader/layout.py).
"""
