"""The concurrency controller: decides when PENDING executions become QUEUED under their
launch plans' policies and the platform caps, with one live leader per deployment."""
