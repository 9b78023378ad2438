"""sdc's version: the one place it is written.

pyproject.toml reads it from here (`[tool.setuptools.dynamic] version = {attr = ...}`, which
setuptools takes from this file's text without importing sdc); `sdc.__version__`, the artifact
manifest's `sdc_version` and `sdc --version` read it from here too. A module of its own so that
codegen and the CLI can name the version without importing the package face `sdc`.
"""

from __future__ import annotations

__version__ = "0.1.0"


def mlir_bindings_version() -> str | None:
    """The version of the installed MLIR Python bindings' distribution (torch-mlir), without importing them."""
    from importlib import metadata

    try:
        return metadata.version("torch-mlir")
    except metadata.PackageNotFoundError:
        return None
