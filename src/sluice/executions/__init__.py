"""The execution lifecycle: creating and aborting executions (the one launch path), the
launch-plan registry, which concurrency policy governs an execution, and the schedules that
launch them. The controller that promotes PENDING executions lives in `sluice.concurrency`."""
