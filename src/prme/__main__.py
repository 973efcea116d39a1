"""``python -m prme``: start the command line."""

from prme.cli import main

main(prog_name="prme")
