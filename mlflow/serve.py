"""Start the MLflow UI/server on the project's tracking store (this folder), at http://127.0.0.1:5000.

    python mlflow/serve.py [--host H] [--port P] [--backend-store-uri URI] [--artifacts-destination DIR]

Same as `python -m adbs_lab.stores.serve`; see `--help`. (This folder must never hold an `__init__.py`
or a `mlflow.py`: either would shadow the mlflow package.)
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root: adbs_lab without installing

from adbs_lab.stores.serve import main  # noqa: E402

raise SystemExit(main())
