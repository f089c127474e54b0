"""hosts: each host method without and with ADBS over seeds (the paper's "<method>" / "<method>+ADBS" rows).

    python studies/hosts.py                                     # baseline, SAVC, ALICE, OrCo x {without, with ADBS}, CPU
    python studies/hosts.py --hosts savc --seeds 0 1 2          # one host, more seeds
    python studies/hosts.py --dataset cifar100 --data-root DIR  # each host's paper settings for CIFAR100, GPU
    python studies/report.py hosts --paper                      # our rows beside the paper's (cifar100)

Rows (search_spaces/hosts.py): for every host its preset that goes with the study's preset (on CPU the
CPU setting with `host` changed; with --dataset or --preset, the host's paper settings for it, e.g.
savc_cifar100) with variant=baseline (the host as published: m = 1, no IC, no boundary fine-tuning) and
variant=adb+ic (ADBS on the host's classification head). Each (row, seed) is one trial of the full
pipeline; the table shows test accuracy per session (mean ± 95% CI over seeds) with Δlast of each row
against the same host without ADBS; hosts_sessions.png has one curve per row (a colour per host,
dashed without ADBS). On CPU every row runs the calibrated CPU preset, so the table's first line
names its one departure from the released code (boundary_lr_scale=0.1, docs/boundary-dynamics.md).
Time: default run (8 rows x seeds 0 1 = 16 trials, 2 at a time; a SAVC, ALICE or OrCo trial is 4-6x a
baseline trial) as measured in studies/times.json for the six rows before OrCo (the README's study table quotes
it); OrCo's four trials add theirs (one OrCo trial: docs/config.md, the orco_cpu preset); --seeds 0 about
half; --smoke ~1.5 min; the paper presets take hours per trial on one GPU (SAVC's CIFAR100 setting is
600 epochs).
Writes <storage>/hosts/: sessions.parquet, trials.parquet, table.txt/.md, best_config.json,
hosts_sessions.png; MLflow experiment 'hosts'.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from any cwd without installing

from adbs import light  # noqa: E402
light.guard(__name__)  # from here on SIGINT and SIGTERM end it with exit 130 and one line (adbs/light.py)

from adbs.hosts import host_names  # noqa: E402
from adbs.config import PRESETS  # noqa: E402
from adbs_lab import study  # noqa: E402 - its driver (Ray, MLflow, pandas, torch) loads once the flags are checked
from adbs_lab.driver import options  # noqa: E402
from adbs_lab.driver.plan import Plan  # noqa: E402
from studies import times  # noqa: E402
from search_spaces import hosts as spaces  # noqa: E402


def plan(opts: options.StudyOptions, hosts: list[str] = spaces.HOSTS) -> tuple[Plan, options.StudyOptions]:
    """The study's Plan and the options it runs with (studies/paper.py composes it too): --set <host>.<option>
    reaches the rows of that host, and the study's base config (the baseline host's) keeps the other --set values."""
    if opts.host:
        raise options.StudyInputError("the hosts study runs every host of --hosts; --host picks one host for the "
                                      "other studies")
    owner = PRESETS.get(opts.preset, {}).get("host")
    if owner:  # its rows would run with that host's settings under every host's label
        raise options.StudyInputError(
            f"--preset {opts.preset} is host {owner}'s preset, but the hosts study gives every host of --hosts its "
            f"own version of the study's preset (search_spaces/hosts.py: rows); pass --preset cpu (the default), "
            f"--smoke, or --dataset NAME, and --hosts to choose the hosts (for host {owner} alone: "
            f"studies/ablation.py --preset {opts.preset})")
    rows = spaces.rows(opts.preset_name, hosts)
    for key, value in ((k, v) for k, v in opts.overrides if "." in k):
        host = key.split(".", 1)[0]
        if host not in hosts:
            raise options.StudyInputError(f"--set {key}={value}: host {host} is not among --hosts {' '.join(hosts)}")
        for name in (spaces.label(host), f"{spaces.label(host)}+ADBS"):
            rows[name][key] = value
    return Plan(
        name="hosts",
        space=spaces.SPACE,
        space_source=f"search_spaces/hosts.py:rows({opts.preset_name!r}, {hosts})",
        rows=rows,
        baseline=spaces.baselines(hosts),
        order=list(rows),
        cpu_defaults={},  # the calibrated CPU preset as it is (8 base epochs)
        est_trial_s=times.trial_s("hosts"),  # mean over the rows, one thread each, two trials at a time
        est_load=times.load("hosts"),
        est_smoke_trial_s=times.smoke_trial_s(),
    ), opts.replace(overrides=tuple((k, v) for k, v in opts.overrides if "." not in k))


if __name__ == "__main__":
    p = options.parser(__doc__, options.Defaults(seeds=(0, 1), smoke_seeds=(0,)))
    p.add_argument("--hosts", nargs="+", default=spaces.HOSTS, choices=list(host_names()),
                   help="host methods to run (adbs/hosts/), each without and with ADBS")
    opts, extra = options.parse(p)
    try:
        composed = plan(opts, extra.hosts)
    except options.StudyInputError as e:
        p.error(str(e))
    study.main(*composed)
