"""``python -m rimthan_workflow_mcp`` is ``rimthan-mcp``."""

from .cli import main

main()
