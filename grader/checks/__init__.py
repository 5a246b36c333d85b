"""The checks the judge runs under pytest (grader/judge/), one folder per exercise."""
