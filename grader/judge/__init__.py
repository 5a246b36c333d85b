"""The judge: a trusted process that runs the checks under pytest and decides every verdict.

``python -m grader.judge`` (__main__.py) runs pytest with its plugin (plugin.py); checks reach
the learner process through its proxy (proxy.py, devices.py), end with the outcomes in
outcomes.py, and compare with trusted.py's references. A check author imports api.py only.
Never imports the learner process's code (grader/learner/, grader/emulation/).
"""
