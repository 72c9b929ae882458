"""One-call solvers of the paper's tasks on the user's own data."""
