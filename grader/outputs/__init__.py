"""What a grading writes: the YAML report (report.py) and a batch's seal (seal.py), the terminal
summary (terminal.py), the gradebook (gradebook.py), the class summary (summary.py) and
Gradescope's results.json (gradescope.py).
"""
