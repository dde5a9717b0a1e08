"""The modular agent: parse the question, localize the structures, verify the relation."""
