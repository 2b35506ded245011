"""The package's version, in one place.

pyproject.toml reads it (setuptools' dynamic version), `infermeter.__version__` re-exports it,
and modules below the top package import it from here: importing the top package from a lower
layer would break the layer rule.
"""

__version__ = "0.1.0"
