"""`sluice serve` for the flyteadmin tests, optionally killing itself at a crash point.

python serve_proc.py [--kill-at POINT[:N]] SLUICE ARGS...

With --kill-at it first installs a hook that SIGKILLs this process the N-th time it reaches
that named crash point (sluice.faults), then runs the `sluice` command line: the hook lives in
this process only.
"""

from __future__ import annotations

import sys

from sluice import faults
from sluice.cli.main import main

if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] == ["--kill-at"]:
        faults.install(faults.KillAt.parse(args[1]))
        args = args[2:]
    sys.argv = ["sluice", *args]
    main()
