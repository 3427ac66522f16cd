"""CLI subcommands. Each module exposes ``register(subparsers)``; heavy imports stay inside handlers."""
