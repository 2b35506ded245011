"""`python -m infermeter` runs the CLI."""

from infermeter.cli.entry import main

main()
