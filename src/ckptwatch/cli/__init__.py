"""Command-line interface: one module per command, each exposing ``register(subparsers)``."""
