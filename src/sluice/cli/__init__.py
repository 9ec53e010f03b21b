"""The `sluice` command line: thin adapters over the runtime's services."""
