"""Build configuration that ``pyproject.toml`` cannot express: ship the top-level ``themes/``
folder inside the package, as ``tui/themes/`` (the design keeps it at the top of the checkout;
``tui.app.themes.bundled_themes_dir`` looks in both places). Everything else, package data
included, is in ``pyproject.toml``."""

from setuptools import find_packages, setup

setup(
    packages=[*find_packages(include=["tui", "tui.*"]), "tui.themes"],
    package_dir={"tui.themes": "themes"},
)
