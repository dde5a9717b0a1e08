"""Reports from eval run folders (``reports``, plural: ``radspatial.report`` is the API
function): ``build`` (summary.md/json, ``build_report``), ``md`` and
``html`` (the tables and the browsable page), ``figures`` (+ ``plotting``, ``figures_frames``),
the sections (``families``, ``rotation``, ``planes``, ``open_answers``, ``usage``, ``probe``),
``common`` (the tables' vocabulary) and ``spar_table`` (``radspatial spar-table``).

This package sits above ``eval/``: it reads what a run wrote (``metrics.json`` through
``core.metrics_record``, ``results.jsonl`` through ``core.records``); nothing in ``eval/`` or
below imports it.
"""
