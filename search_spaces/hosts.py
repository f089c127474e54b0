"""hosts: every host method without and with ADBS (the paper's Tables 1-3: "<method>" and "<method>+ADBS").

Rows are named sets of Config overrides: for each host, its preset that goes with the study's preset
(adbs/config/presets.py: host_preset; on CPU only `host` changes, on a paper dataset the host's own settings),
with variant=baseline (m = 1 fixed, no IC, no boundary fine-tuning: the host as published) or
variant=adb+ic (ADBS on the host's head). Each row is compared with its host without ADBS (Delta_last).
"""

from typing import Any

from adbs.config import PRESETS, Config, host_preset

SPACE: dict[str, Any] = {}  # nothing sampled: every row over every seed

LABELS = {"baseline": "baseline", "savc": "SAVC", "alice": "ALICE", "orco": "OrCo"}
"""Row label of each host (the paper's names; a host not listed here is labelled by its registry name)."""

WITHOUT = {"variant": "baseline"}
WITH = {"variant": "adb+ic"}


def label(host: str) -> str:
    return LABELS.get(host, host)


def rows(preset: str, hosts: list[str]) -> dict[str, dict]:
    """{"<host>": ..., "<host>+ADBS": ...} for `hosts`: what each host's preset changes in `preset`, and the variant."""
    out = {}
    for host in hosts:
        own = host_preset(host, preset)
        change = {k: v for k, v in own.items() if PRESETS[preset].get(k, object()) != v}
        # what the host's preset leaves at Config's default where the study's preset does not (orco_cub200: the
        # cosine schedule and 10 boundary epochs against cub200's milestones and 1 epoch)
        change.update({k: getattr(Config(), k) for k in PRESETS[preset] if k not in own})
        change["host"] = host
        out[label(host)] = {**change, **WITHOUT}
        out[f"{label(host)}+ADBS"] = {**change, **WITH}
    return out


def baselines(hosts: list[str]) -> dict[str, str]:
    """Delta_last reference of every row: the same host without ADBS."""
    return {f"{label(h)}{suffix}": label(h) for h in hosts for suffix in ("", "+ADBS")}


HOSTS = ["baseline", "savc", "alice", "orco"]
ROWS = rows("cpu", HOSTS)  # the default study's rows
BASELINE = baselines(HOSTS)
