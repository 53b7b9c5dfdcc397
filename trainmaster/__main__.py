"""`python -m trainmaster` runs the CLI."""

from trainmaster.cli import run

run()
