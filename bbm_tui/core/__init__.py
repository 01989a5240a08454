"""The domain: no Textual here, and litellm only inside `llm.py`, imported lazily."""
