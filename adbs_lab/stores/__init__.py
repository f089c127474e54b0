"""Where a study's results live: the MLflow tracking store, the study folder, the database files, the commands that
serve them. Light (standard library, adbs/redaction.py, adbs/writable.py; MLflow and Optuna imported where used), so
the MLflow launcher and studies/report.py start in well under a second. The package imports nothing.

    paths          absolute locations (the repository, the default storage and MLflow store), the code version
    sqlite_kind    what a SQLite file holds, checked before MLflow or Optuna opens it
    tracking_store the MLflow store: which one, whether it can be used, a patient client, the study's run map
    study_folder   a study's folder or object-store prefix, its lock, its snapshot, earlier results moved aside
    serve          the MLflow UI and tracking server (`python -m adbs_lab.stores.serve`, mlflow/serve.py)
    dashboard      optuna-dashboard, read-only, on a study's Optuna storage (`python -m adbs_lab.stores.dashboard`)
"""

__all__ = ["paths", "sqlite_kind", "tracking_store", "study_folder", "serve", "dashboard"]
