"""trainmaster: declarative large-model training on Kubernetes GPU clusters."""

__version__ = "0.1.0"
