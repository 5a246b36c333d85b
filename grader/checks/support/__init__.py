"""What the checks use inside the sandboxed child: the learner's module, devices, meters."""
