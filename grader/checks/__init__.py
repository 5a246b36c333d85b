"""The checks the sandboxed child runs under pytest, one folder per exercise."""
