"""Parts of the lock scheduler: task model, lock table, wait list, orderings, reference."""
