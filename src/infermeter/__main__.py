"""`python -m infermeter` runs the CLI.

The import is guarded too: a Ctrl-C landing while `cli.entry` loads (before its own guard is in
place) printed an importlib traceback in CI.
"""

try:
    from infermeter.cli.entry import main
except KeyboardInterrupt:
    import sys

    sys.stderr.write("interrupted\n")
    raise SystemExit(130) from None

main()
