"""The `infermeter` command line: typer app, one module per command group with its rendering.

No measuring or analysis logic lives here: commands parse options, call the layers below and
print what they return (a card for people, or one JSON document with --json).
"""
