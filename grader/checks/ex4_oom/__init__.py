"""Checks for one exercise; see course.yaml for points and visibility."""
