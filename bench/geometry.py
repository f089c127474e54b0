"""What sets the class geometry of the embedded benchmark, and what that geometry does to the released recipe.

    python bench/geometry.py                          # every factor, seeds 0 1 2 (~45 min on an idle 2-core CPU)
    python bench/geometry.py --factors ref relu twin0 # some of them
    python bench/geometry.py --list                   # the factors and what each changes

The question (docs/boundary-dynamics.md, "Class geometry"): the paper's fixed-boundary baseline has a
class separation D_cs of 0.88 on CIFAR-100 (class prototypes nearly orthogonal), and on real CIFAR-100
the released ADBS recipe does not collapse; on the embedded benchmark v2 the baseline's D_cs was
0.34-0.40 and the released recipe never predicted a novel class. Is the geometry the reason?

Each factor is a benchmark recipe (adbs/data/synthetic.py: Recipe) and a config, changed in one respect
from a reference (`ref`: the default benchmark and the CPU preset's backbone). For every factor and seed
it runs, through `adbs.trial.run_trial` (no Ray), the fixed-boundary baseline and the released recipe
(`variant=adb+ic`, `boundary_lr_scale=1`: the released code's boundary handling, whatever the CPU preset
sets), and prints per factor, as mean ± 95% CI (t-distribution) over the seeds:

- baseline: D_cs, session 0 / last session test accuracy, PD, last-session novel accuracy;
- geometry of the baseline's prototypes: mean cosine of each novel prototype to its nearest base
  prototype; for the novel test images, the cosine to their own prototype against the best base one;
- released recipe: base boundaries m < 0 after the base session (of 60), novel |m| / base |m| after the
  last session, novel accuracy (mean over the incremental sessions), share of last-session predictions
  that name a novel class, and in how many seeds it collapses (some session with novel accuracy 0.00,
  or some seen class never predicted: adbs.metrics.collapse_warnings).

Writes table.md, runs.csv and the command to --out. The benchmark is generated per factor in memory
(a few seconds); nothing is downloaded.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from adbs import exits  # noqa: E402
from adbs.backbones import BACKBONES, convnet, register_backbone  # noqa: E402
from adbs.config import PRESETS, from_dict  # noqa: E402
from adbs.data import build_data, synthetic  # noqa: E402
from adbs_lab.stats.intervals import mean_t  # noqa: E402

if "convnet_leaky" not in BACKBONES:  # this study's factor only, not a CPU preset's backbone
    register_backbone("convnet_leaky")(lambda: convnet(last_activation="leaky_relu"))

# One factor changed at a time from the reference: (what it changes, recipe overrides, config overrides).
FACTORS: dict[str, tuple[str, dict, dict]] = {
    "ref": ("benchmark v3 and the CPU preset (signed feature layer, 8 base epochs)", {}, {}),
    "relu": ("feature layer: ReLU after the last block (convnet, v1/v2's backbone)", {}, {"backbone": "convnet"}),
    "leaky": ("feature layer: LeakyReLU(0.1) after the last block (as ResNet-12's blocks)", {},
              {"backbone": "convnet_leaky"}),
    "twin0": ("no novel class is a twin of a base class", {"twin_prob": 0.0}, {}),
    "twin05": ("half the novel classes are twins", {"twin_prob": 0.5}, {}),
    "core0": ("no shared superclass core (4 own factors per class)", {"core_factors": 0, "own_factors": (4, 4)}, {}),
    "core3": ("3 shared core factors, 1 own", {"core_factors": 3, "own_factors": (1, 1)}, {}),
    "noise20": ("pixel noise std 20 (benchmark v2's images)", {"noise_std": 20.0}, {}),
    "noise40": ("pixel noise std 40", {"noise_std": 40.0}, {}),
    "super10": ("10 superclasses of 10 classes", {"superclasses": 10}, {}),
    "super50": ("50 superclasses of 2 classes", {"superclasses": 50}, {}),
    "ep4": ("4 base epochs", {}, {"base_epochs": 4}),
    "ep16": ("16 base epochs", {}, {"base_epochs": 16}),
    "v2": ("benchmark v2 with its backbone (ReLU feature layer)", {}, {"synthetic_version": 2, "backbone": "convnet"}),
    "v1": ("benchmark v1 with its backbone (ReLU feature layer)", {}, {"synthetic_version": 1, "backbone": "convnet"}),
}
RELEASED = {"variant": "adb+ic", "boundary_lr_scale": 1.0}
BASELINE = {"variant": "baseline"}


def config(factor: str, variant: dict, seed: int, threads: int):
    _, _, over = FACTORS[factor]
    return from_dict({**PRESETS["cpu"], **over, **variant, "seed": seed, "split_seed": seed, "threads": threads})


def data_for(factor: str, cfg, pools: dict):
    """The protocol of `cfg` on the factor's benchmark (its recipe generated once per factor)."""
    _, recipe_over, _ = FACTORS[factor]
    data = build_data(cfg)
    if not recipe_over:
        return data
    if factor not in pools:
        recipe = dataclasses.replace(synthetic.recipe(cfg.synthetic_version), **recipe_over)
        pools[factor] = synthetic.generate_recipe(cfg.synthetic_seed, recipe, f"{factor}")
    train, test = pools[factor]
    return dataclasses.replace(data, train_pool=train, test_pool=test)


def measure(result) -> dict[str, float]:
    s, sm = result.sessions, result.summary
    novel = [r["test_novel_acc"] for r in s[1:]]
    last = s[-1]
    return {
        "d_cs": sm["d_cs"], "s0": s[0]["test_acc"], "last": last["test_acc"], "pd": s[0]["test_acc"] - last["test_acc"],
        "last_novel": last["test_novel_acc"], "novel_mean": statistics.fmean(novel) if novel else math.nan,
        "nearest_base_cos": sm["novel_nearest_base_cos"], "own_cos": sm["novel_own_cos"],
        "best_base_cos": sm["novel_best_base_cos"], "neg_after_base": s[0]["boundary_negative"],
        "novel_over_base_abs": last["boundary_novel_abs_mean"] / last["boundary_base_abs_mean"],
        "pred_novel_share": last["test_pred_novel_share"], "collapsed": float(bool(result.warnings)),
    }


COLUMNS = [  # (header, variant, key, format)
    ("baseline D_cs", "baseline", "d_cs", "{:.3f}"),
    ("baseline s0", "baseline", "s0", "{:.1f}"),
    ("baseline last", "baseline", "last", "{:.1f}"),
    ("baseline PD", "baseline", "pd", "{:.1f}"),
    ("baseline last novel", "baseline", "last_novel", "{:.1f}"),
    ("novel: nearest base cos", "baseline", "nearest_base_cos", "{:.2f}"),
    ("novel images: own / best base cos", "baseline", ("own_cos", "best_base_cos"), "{:.2f}"),
    ("released: m<0 after base", "released", "neg_after_base", "{:.1f}"),
    ("released: novel/base abs m", "released", "novel_over_base_abs", "{:.2f}"),
    ("released: novel acc", "released", "novel_mean", "{:.1f}"),
    ("released: % pred novel", "released", "pred_novel_share", "{:.1f}"),
    ("released: s0 / last", "released", ("s0", "last"), "{:.1f}"),
    ("released collapses", "released", "collapsed", None),
]


def cell(rows: list[dict], key, fmt: str | None) -> str:
    if fmt is None:
        return f"{int(sum(r[key] for r in rows))} of {len(rows)}"
    if isinstance(key, tuple):
        return " / ".join(fmt.format(mean_t([r[k] for r in rows])[0]) for k in key)
    mean, half = mean_t([r[key] for r in rows])
    return fmt.format(mean) + (f" ± {fmt.format(half)}" if len(rows) > 1 else "")


def table(results: dict[tuple[str, str], list[dict]], factors: list[str]) -> str:
    head = "| factor | " + " | ".join(c[0] for c in COLUMNS) + " |"
    lines = [head, "|" + "---|" * (len(COLUMNS) + 1)]
    for f in factors:
        cells = [cell(results.get((f, v), []), k, fmt) if results.get((f, v)) else "-" for _, v, k, fmt in COLUMNS]
        lines.append(f"| {f}: {FACTORS[f][0]} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--factors", nargs="+", default=list(FACTORS), metavar="NAME", help="factors to run (default: all)")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--threads", type=int, default=2, help="torch CPU threads per run")
    p.add_argument("--out", default=None, help="folder for table.md and runs.csv (default results/geometry/<time>)")
    p.add_argument("--list", action="store_true", help="list the factors and exit")
    a = p.parse_args(argv)
    if a.list:
        for name, (what, recipe, over) in FACTORS.items():
            print(f"{name:<8} {what}  (recipe {recipe or '-'}, config {over or '-'})")
        return exits.OK
    unknown = [f for f in a.factors if f not in FACTORS]
    if unknown:
        print(f"error: unknown factor(s) {', '.join(unknown)}; valid: {', '.join(FACTORS)}", file=sys.stderr)
        return exits.REFUSED
    if len(set(a.seeds)) != len(a.seeds) or min(a.seeds) < 0:
        print("error: --seeds must be distinct integers >= 0", file=sys.stderr)
        return exits.REFUSED
    out = Path(a.out or f"results/geometry/{time.strftime('%Y%m%d-%H%M%S')}")
    if out.exists() and any(out.iterdir()):
        print(f"error: --out {out} exists and is not empty; pick a new folder", file=sys.stderr)
        return exits.REFUSED
    for f in a.factors:  # every config is checked before anything trains
        for v in (BASELINE, RELEASED):
            config(f, v, a.seeds[0], a.threads).validate()

    import pandas as pd

    from adbs.trial import run_trial

    out.mkdir(parents=True, exist_ok=True)
    results: dict[tuple[str, str], list[dict]] = {}
    records = []
    pools: dict = {}
    n, done, t_all = len(a.factors) * len(a.seeds) * 2, 0, time.perf_counter()
    for f in a.factors:
        for seed in a.seeds:
            for vname, v in (("baseline", BASELINE), ("released", RELEASED)):
                cfg = config(f, v, seed, a.threads)
                t0 = time.perf_counter()
                m = measure(run_trial(cfg, data=data_for(f, cfg, pools)))
                done += 1
                results.setdefault((f, vname), []).append(m)
                records.append({"factor": f, "variant": vname, "seed": seed, **m})
                elapsed = time.perf_counter() - t_all
                print(f"[{done}/{n}] {f} {vname} seed {seed}: D_cs {m['d_cs']:.3f} s0 {m['s0']:.1f} last {m['last']:.1f} "
                      f"novel {m['novel_mean']:.1f} ({time.perf_counter() - t0:.0f} s; "
                      f"ETA {elapsed / done * (n - done) / 60:.0f} min)",
                      flush=True)
        pools.pop(f, None)
        pd.DataFrame(records).to_csv(out / "runs.csv", index=False)  # after every factor: nothing lost on Ctrl-C
    md = table(results, a.factors)
    cmd = "python bench/geometry.py " + " ".join(sys.argv[1:] if argv is None else argv)
    (out / "table.md").write_text(f"`{cmd.strip()}` (seeds {' '.join(map(str, a.seeds))}; mean ± 95% CI)\n\n{md}\n")
    print("\n" + md)
    print(f"\nwrote {out}/table.md and runs.csv ({(time.perf_counter() - t_all) / 60:.1f} min)")
    return exits.OK


if __name__ == "__main__":
    raise SystemExit(main())
