"""The `infermeter` command line: typer app, one module per command, no measuring logic."""
