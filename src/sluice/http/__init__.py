"""The HTTP adapters: the JSON API under /api/v1 and the server-rendered web UI, both thin
layers over `sluice.service.Sluice` (parse, call one verb, render)."""
