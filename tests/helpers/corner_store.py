"""An MLflow store in the tracker's layout whose studies reach the corners of the statistics across studies and
tasks (docs/statistics.md): hosts runs on two datasets where ADBS wins on every seed (a probability of improvement
of 1) and one on a third dataset with a single seed (a one-run task); an ablation whose adb+ic is within a point
of adb; a kshot_grid with three seeds in one cell and one in another (an unpaired comparison with a side under 8
runs, and comparisons that can have no interval). Stub trials, no training: seconds to build."""

from __future__ import annotations

import json

SEEDS = (0, 1, 2)
HOSTS = {"SAVC": 60.0, "SAVC+ADBS": 61.0, "ALICE": 55.0, "ALICE+ADBS": 56.0}
ABLATION = {"baseline": [50.0, 52.5, 49.0], "adb": [47.0, 49.8, 45.5], "adb+ic": [47.2, 50.1, 45.6]}
KSHOT = {"ways=5 shots=1 variant=baseline": [40.0, 44.0, 41.5], "ways=5 shots=1 variant=adb+ic": [41.0, 45.5, 42.0],
         "ways=5 shots=5 variant=baseline": [55.0], "ways=5 shots=5 variant=adb+ic": [56.5]}


def _study(c, name: str, rows: dict[str, list[float]], *, dataset: str, baseline, conditions: dict | None = None,
           novel: bool = True) -> str:
    """One study's parent run and its trials (a value list per row: one seed each); its parent run id."""
    from mlflow.entities import Metric, Param

    from adbs.config import Config
    from adbs_lab.records import metrics_keys as K

    exp = c.get_experiment_by_name(name)
    exp_id = exp.experiment_id if exp else c.create_experiment(name)
    parent = c.create_run(exp_id, run_name=f"{name} {dataset}", tags={
        "adbs.role": "study", "adbs.study": name, "adbs.order": json.dumps(list(rows)),
        "adbs.baseline": baseline if isinstance(baseline, str) else json.dumps(baseline),
        "adbs.command": f"python studies/{name}.py --dataset {dataset}"})
    number = 0
    for label, values in rows.items():
        for seed, last in enumerate(values):
            run = c.create_run(exp_id, run_name=f"{label} seed={seed}", tags={
                "mlflow.parentRunId": parent.info.run_id, "adbs.role": "trial", "adbs.study": name,
                "adbs.trial_id": f"{name}-{dataset}-{number}", "adbs.optuna_trial": str(number),
                "adbs.state": K.COMPLETE, "adbs.label": label})
            got = [80.0, last]
            extra = (conditions or {}).get(label, {})
            cfg = Config(seed=seed, dataset=dataset, keep_embeddings=False, **extra).to_dict()
            metrics = [Metric("session/test_acc", a, 0, s) for s, a in enumerate(got)]
            metrics += [Metric("session/test_novel_acc", a / 2 + seed, 0, s) for s, a in enumerate(got)] if novel else []
            c.log_batch(run.info.run_id, metrics=metrics + [Metric("summary/val_avg_acc", sum(got) / 2, 0, 0)],
                        params=[Param(k, json.dumps(v) if isinstance(v, list) else str(v)) for k, v in cfg.items()])
            c.set_terminated(run.info.run_id)
            number += 1
    c.set_terminated(parent.info.run_id)
    return parent.info.run_id


def corner_store(root) -> tuple[str, dict[str, str]]:
    """(tracking URI, {what: parent run id}) of the store under `root`."""
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{root / 'mlflow.db'}"
    c = MlflowClient(uri)
    ids = {}
    adbs = {"SAVC+ADBS": "SAVC", "ALICE+ADBS": "ALICE"}
    for dataset, gain in (("cifar100", (1.0, 1.5, 0.5)), ("mini_imagenet", (2.0, 1.0, 1.5))):
        rows = {lab: [v + s + (gain[s] if lab.endswith("+ADBS") else 0.0) for s in SEEDS] for lab, v in HOSTS.items()}
        ids[f"hosts {dataset}"] = _study(c, "hosts", rows, dataset=dataset, baseline=adbs)
    one = {lab: [v + 10.0 - (0.0 if lab.endswith("+ADBS") else 1.0)] for lab, v in HOSTS.items()}
    ids["hosts cub200 (one seed)"] = _study(c, "hosts", one, dataset="cub200", baseline=adbs)
    ids["ablation"] = _study(c, "ablation", ABLATION, dataset="cifar100", baseline="baseline")
    shots = {lab: {"ways": 5, "shots": int(lab.split()[1].split("=")[1])} for lab in KSHOT}
    ids["kshot_grid"] = _study(c, "kshot_grid", KSHOT, dataset="cifar100", conditions=shots,
                               baseline={lab: lab.replace("adb+ic", "baseline") for lab in KSHOT if "adb+ic" in lab})
    return uri, ids
