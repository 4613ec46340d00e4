"""What serves the operator: the status view and page, control requests, run info."""
