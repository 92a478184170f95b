"""The engine. Importing any part of it first puts the Hugging Face libraries offline
(attn.settings): the app never downloads."""

from . import settings  # noqa: F401  (before transformers, whichever module imports it)
