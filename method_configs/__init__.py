"""nerfstudio's entry points of this package's methods (``pyproject.toml``: ``nerfstudio.method_configs``)."""
