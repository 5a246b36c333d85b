"""The learner process: the only process that runs the learner's code (grader/protocol.py).

It imports the learner's modules (``toplevel``), runs the calls the judge asks for (``runner``,
``calls``) on the device sessions it asks for (``devices``, ``standin``, ``worlds``, ``meter``,
``instruments``, ``patching``), with the objects a recipe names (``recipes``), and answers with
plain data (``values``). Nothing in this package decides a verdict, and nothing here needs the
checks, the course or the messages: an isolated learner process sees only this package.
"""
