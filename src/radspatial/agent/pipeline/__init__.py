"""The agent's pipeline, one module per step: ``parse`` -> the question type's ``to_locate``
-> locate (``types``: the localizer protocol and registry) -> ``trust`` (the shared checks on
what was found) -> ``mirror`` (both sides, where the image does not show them) -> the type's
``verify``; ``agent`` runs the steps and writes each into the answer's trace."""
