#!/usr/bin/env python3
"""`python run_daemon.py [--params FILE] [COMMAND]`: the same as the installed `parser-daemon` (parser/cli.py)."""
from parser.cli import run

if __name__ == "__main__":
    run()
