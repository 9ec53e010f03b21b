"""The `sluice` command line: thin adapters over the service layer (`sluice.service`)."""
