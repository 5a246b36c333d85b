"""Points, statuses and the learner-facing texts: results.py (the typed results), scoring.py
(a run's outcomes into a report), texts/ (vi.yaml, en.yaml and the renderer).
"""
