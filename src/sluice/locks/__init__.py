"""Lock-keyed task concurrency: lock names computed from inputs and their capacities
(`names`), and the lock scheduler that orders ready tasks under a parallelism cap
(`scheduler`, with its task model, lock table, wait list and ordering policies)."""
