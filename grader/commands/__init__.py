"""The command line (cli.py; ``grader`` and ``python -m grader``) and what each command does:
batch.py, selfcheck.py (``grader check`` and ``grader.check()``), release.py,
gradescope_zip.py, autograde.py, doctor.py, notebooks.py. Nothing else imports this layer, but
the package's own ``grader.check()`` and ``grader.doctor()``, lazily.
"""
