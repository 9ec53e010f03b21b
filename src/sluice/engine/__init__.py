"""The engine: an event-driven reconcile loop over executions, nodes and plugins."""
