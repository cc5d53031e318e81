"""`python -m holodesk.app.cli`: the same entry point as the `holodesk` console script."""

import sys

from holodesk.app.cli.main import main

sys.exit(main())
