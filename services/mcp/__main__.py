"""`python -m services.mcp [--http ...]`: what `specdec mcp` runs (services/mcp/command.py)."""

import sys

from services.mcp.command import main

sys.exit(main())
