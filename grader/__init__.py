"""Auto-grader for Lesson 14 "GPU và CUDA" of the PyTorch course."""

__version__ = "0.1.0"
