"""bbm-tui: step through chain-of-thought traces the way BIG-Bench Mistake made them."""

__version__ = "0.1.0"
