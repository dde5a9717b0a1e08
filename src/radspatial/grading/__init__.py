"""Grading of free-text answers to the open question types, in layers: rules
(``normalize``), then an LLM judge (``judge``) for what the rules cannot decide, then human
review marks (``review``) folded into the report without overwriting the automatic grade."""
