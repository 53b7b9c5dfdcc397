"""The Pulumi program: the function `trainmaster pulumi` runs inline (components/program.py)."""

from pathlib import Path

from components.program import program

program(Path(__file__).parent)
