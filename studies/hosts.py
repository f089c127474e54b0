"""hosts: each host method without and with ADBS over seeds (the paper's "<method>" / "<method>+ADBS" rows).

    python studies/hosts.py                                     # baseline, SAVC, ALICE x {without, with ADBS}, CPU
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
Time: default run (6 rows x seeds 0 1 = 12 trials, 2 at a time; a SAVC or ALICE trial is 4-5x a baseline
trial) 12.5 min wall on this project's 2-core CPU with another job beside it (README); --seeds 0 about
half; --smoke ~1.5 min; the paper presets take hours per trial on one GPU (SAVC's CIFAR100 setting is
600 epochs).
Writes <storage>/hosts/: sessions.parquet, trials.parquet, table.txt/.md, best_config.json,
hosts_sessions.png; MLflow experiment 'hosts'.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from any cwd without installing

from adbs.hosts import host_names  # noqa: E402
from adbs_lab import cli, figures, study  # noqa: E402
from search_spaces import hosts as spaces  # noqa: E402

p = cli.parser(__doc__, pruner="none", seeds=[0, 1])
p.add_argument("--hosts", nargs="+", default=spaces.HOSTS, choices=list(host_names()),
               help="host methods to run (adbs/hosts/), each without and with ADBS")
args = p.parse_args()
if args.host:
    p.error("the hosts study runs every host of --hosts; --host picks one host for the other studies")
if args.smoke and "--seeds" not in sys.argv:
    args.seeds = [0]  # smoke: one seed per row

# --set <host>.<option>=VALUE reaches the rows of that host (the study's base config is the baseline host's)
options = [o for o in args.overrides if "." in o.split("=", 1)[0]]
args.overrides = [o for o in args.overrides if o not in options]
rows = spaces.rows(cli.preset_name(args), args.hosts)
for item in options:
    key, value = item.split("=", 1)
    host = key.strip().split(".", 1)[0]
    if host not in args.hosts:
        p.error(f"--set {item}: host {host} is not among --hosts {' '.join(args.hosts)}")
    for name in (spaces.label(host), f"{spaces.label(host)}+ADBS"):
        rows[name][key.strip()] = value.strip()
plan = study.Plan(
    name="hosts",
    space=spaces.SPACE,
    space_source=f"search_spaces/hosts.py:rows({cli.preset_name(args)!r}, {args.hosts})",
    rows=rows,
    baseline=spaces.baselines(args.hosts),
    order=list(rows),
    cpu_defaults={},  # the calibrated CPU preset as it is (8 base epochs)
    est_trial_s=110,  # mean over the rows, one thread each, two trials at a time
)
out = study.run(plan, args)
out.finish([figures.host_curves(out.sessions, out.dir / "hosts_sessions.png", order=plan.order)])
