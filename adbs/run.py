"""Single-run entry point: one config, one seed, the full base-plus-incremental pipeline.

    python -m adbs.run --variant adb+ic --alpha 0.05            # embedded benchmark, CPU preset
    python -m adbs.run --preset cifar100 --data-root ~/data      # the paper's CIFAR100 settings
    python -m adbs.run --preset smoke --out smoke.json            # seconds, for a quick check
    python -m adbs.run --config my.yaml --seed 1                  # values from a file, flags on top
    python -m adbs.run --config runs/alpha_sweep/best_config.json # a study's best configuration
    python -m adbs.run --host savc --variant baseline             # another host method, without ADBS
    python -m adbs.run --host alice --alice.mix-times 4            # a host's option (--help lists them)

Prints one line per base epoch and per session, then a per-session table,
and writes the full result (config, curves, sessions, boundaries, summary) as
JSON to --out (default results/run-[<host>-]<variant>-seed<seed>.json). Every Config
field is an option, and every host's options as --<host>.<option> (`--help` lists them
with their docstrings); `--set KEY=VALUE` is the same as a field's flag. The studies share
this grammar (adbs/config/cli.py): a flag means the same in both.
"""

from __future__ import annotations

from adbs import light

light.guard(__name__)  # from here on SIGINT and SIGTERM end it with exit 130 and one line (adbs/light.py)

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
from collections.abc import Iterator  # noqa: E402
from contextlib import contextmanager, nullcontext  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import TYPE_CHECKING  # noqa: E402

from adbs import departures, digests  # noqa: E402
from adbs.cells import number  # noqa: E402
from adbs.config import Config, ConfigError, cli, from_typed, load_file, resolve  # noqa: E402
from adbs.exits import FAILED, INTERRUPTED, OK, REFUSED, Exit, entry  # noqa: E402
from adbs.writable import out_file_problem  # noqa: E402

if TYPE_CHECKING:
    from adbs import data, runtime, trainer, trial
else:  # torch: loaded at their first use, once the flags and the config are checked (adbs/light.py)
    data = light.lazy("adbs.data")
    runtime = light.lazy("adbs.runtime")
    trainer = light.lazy("adbs.trainer")
    trial = light.lazy("adbs.trial")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m adbs.run", usage=f"%(prog)s {cli.USAGE} [--out OUT] [--quiet]",
        description="Run one ADBS trial (base session + all incremental sessions) and print its per-session table.",
    )
    cli.add_shared_flags(p)  # --preset, --config, --set, --host, --dataset, --data-root, --dry-run, as in the studies
    p.add_argument("--out", default=None, help="where to write the JSON result (default results/run-<variant>-seed<seed>.json)")
    p.add_argument("--quiet", action="store_true", help="print only the final table")
    cli.add_field_flags(p, "config fields (adbs.config.Config; each the same as --set FIELD=VALUE)")
    return p


def config_of(args: argparse.Namespace) -> Config:
    """The run's Config from its parsed flags: preset < --config file < the flags (adbs.config.resolve), checked.

    Each value is typed once: the file's keys by load_file, the flags' by resolve; from_typed trusts them."""
    file = load_file(args.config) if args.config else None
    return from_typed(resolve(args.preset, None, cli.overrides(args), file)).validate()


def session_table(result) -> str:
    rows = result.sessions
    head = ("session  classes   val_acc  test_acc  test_base  test_novel  test_hmean  novel_pred%  unpredicted"
            "  m<0  |m|_base  |m|_novel")
    lines = [*departures.lines(departures.changed(result.config)), head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{int(r['session']):>7}  {int(r['n_classes']):>7}  {r['val_acc']:>8.2f}  {r['test_acc']:>8.2f}  "
            f"{r['test_base_acc']:>9.2f}  {number(r['test_novel_acc']):>10}  {number(r['test_hmean']):>10}  "
            f"{number(r['test_pred_novel_share']):>11}  {int(r['test_unpredicted_classes']):>11}  "
            f"{int(r['boundary_negative']):>3}  {r['boundary_base_abs_mean']:>8.3f}  {number(r['boundary_novel_abs_mean'], 3):>9}"
        )
    s = result.summary
    lines.append("-" * len(head))
    lines.append(
        f"avg acc: val {s['val_avg_acc']:.2f}  test {s['test_avg_acc']:.2f} | last: test {s['test_last_acc']:.2f} | "
        f"PD {s['test_pd']:.2f} | D_cs {s['d_cs']:.4f} | best base epoch {int(s['best_base_epoch'])} | {s['wall_time_s']:.1f}s"
    )
    lines += [f"WARNING: {w}" for w in result.warnings]
    return "\n".join(lines)


@entry
def main(argv: list[str] | None = None) -> int:
    """Exit status (adbs/exits.py): OK done, FAILED an error after the run started (traceback and its first line),
    REFUSED refused before anything started (one line), INTERRUPTED by SIGINT or SIGTERM (one line)."""
    args = build_parser().parse_args(argv)
    with _interrupts() as stopped:
        try:
            return _main(args)
        except KeyboardInterrupt:
            pass
        except Exception:  # noqa: BLE001 - after an interrupt, whatever it broke is the interrupt's doing
            if not stopped:
                raise
    raise Exit(INTERRUPTED, f"interrupted by {stopped[0] if stopped else 'SIGINT'}: the run stopped before writing "
                            "its result; run the same command again to start it over")


def _main(args: argparse.Namespace) -> int:
    try:
        cfg, out, warnings = preflight(args)
    except (ConfigError, ValueError, OSError) as e:
        raise Exit(REFUSED, f"error: {e}") from None
    for w in warnings:
        print(f"warning: {w}", file=sys.stderr)
    if args.dry_run:
        print(f"dry run: ADBS {cfg.variant} in host {cfg.host} on {cfg.dataset} (preset {args.preset}"
              f"{', config ' + args.config if args.config else ''}), seed {cfg.seed}, {cfg.base_epochs} base epochs, "
              f"{cfg.shots}-shot sessions; config, device and data checked (every image decoded, each transform "
              f"tried); would write {out}; nothing was trained or written")
        return OK
    try:
        execute(cfg, args, out)
    except Exception as e:  # noqa: BLE001 - the run started: the traceback, then its first line last, exit 1
        traceback.print_exc()
        first = (str(e).splitlines() or [""])[0]
        raise Exit(FAILED, f"error: the run failed after it started: {type(e).__name__}: {first} (traceback "
                           "above)") from None
    return OK


def preflight(args: argparse.Namespace) -> tuple[Config, Path, list[str]]:
    """Everything the run checks before it starts, the same for --dry-run: the config, the device, the data
    (adbs.data.preflight_data: every image decoded, each transform tried; remembered by content when the run is
    not a dry run) and the output path. Creates nothing; returns (config, output path, warning lines)."""
    cfg = config_of(args)
    runtime.check_device(cfg)
    with digests.read_only() if args.dry_run else nullcontext():  # a dry run records nothing
        warnings = data.preflight_data(cfg, remember=not args.dry_run)
    who = "" if cfg.host == "baseline" else f"{cfg.host}-"
    out = Path(args.out or f"results/run-{who}{cfg.variant}-seed{cfg.seed}.json").resolve()
    problem = out_file_problem(out)  # nothing is created here: the run makes the missing folders when it writes
    if problem:
        raise OSError(problem)
    return cfg, out, warnings


def execute(cfg: Config, args: argparse.Namespace, out: Path) -> None:
    """Train and score the run, print its table, write its result (the output folder is made only now)."""
    log = None if args.quiet else (lambda s: print(s, flush=True))
    if log:
        log(f"ADBS {cfg.variant} in host {cfg.host} on {cfg.dataset} ({cfg.backbone}), seed {cfg.seed}, "
            f"split seed {cfg.split_seed}; {runtime.describe(cfg, runtime.device_kind(cfg))}")
    t0 = time.perf_counter()
    result = trial.run_trial(cfg, hooks=trainer.Hooks(log=log))
    print(session_table(result))
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(out.suffix + ".tmp")
    try:
        tmp.write_text(json.dumps(result.to_dict(), indent=1))
        os.replace(tmp, out)  # atomic: an interrupted write never leaves a half file
    finally:
        tmp.unlink(missing_ok=True)
    print(f"wrote {out} ({time.perf_counter() - t0:.1f}s)")


@contextmanager
def _interrupts() -> Iterator[list[str]]:
    """SIGINT and SIGTERM raise KeyboardInterrupt in the main thread and are noted (the list gets the signal's
    name), so main exits 130 with one line instead of dying by the signal; the handlers are restored after."""
    stopped: list[str] = []
    if threading.current_thread() is not threading.main_thread():
        yield stopped
        return

    def handler(signum: int, _frame) -> None:
        stopped.append(signal.Signals(signum).name)
        raise KeyboardInterrupt

    before = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stopped
    finally:
        for sig, h in before.items():
            signal.signal(sig, h)


if __name__ == "__main__":
    sys.exit(main())
