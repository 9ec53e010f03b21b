"""Concurrency control above single tasks: execution limits, the lock scheduler, schedules."""
