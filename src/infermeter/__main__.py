"""`python -m infermeter` runs the CLI."""

from infermeter.cli.app import main

main()
