"""rff-field: bias-free adaptive filters on Fourier feature embeddings (Ma et al., ICML 2025)."""

__version__ = "0.1.0"
