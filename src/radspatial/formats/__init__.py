"""Data formats of other tools, each read and written here: ``mirp`` (MIRP's files),
``mirp_export`` (a run in MIRP's layout), ``hf_export`` (Hugging Face parquet + card),
``lmms_export`` / ``lmms_tasks`` / ``lmms_import`` (an lmms-eval task folder, its hooks, its
logs read back), ``inspect_import`` (an inspect_ai log read back)."""
