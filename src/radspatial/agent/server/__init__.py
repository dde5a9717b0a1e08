"""The agent as an OpenAI-compatible HTTP server: ``server`` (start, agents, answers),
``server_http`` (the request handler), ``server_limits`` (the limits record), ``chat_format``
(chat requests in, completions out)."""
