"""The optional `specdec` commands, one module each; services/cli/main.py registers each it finds."""
