"""Concurrency control above the store: the execution launch path, launch plans and their
concurrency controller, schedules, and the lock scheduler that orders ready tasks."""
