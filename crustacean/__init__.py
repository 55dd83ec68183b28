"""crustacean: keeps an AI agent's markdown memory workspace alive."""

__version__ = "0.1.0"
