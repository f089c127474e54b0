"""Several studies run as one (studies/paper.py): one plan of parts, one preflight of them all before any trains
(bad input in any part ends here, exit 2, nothing written), one cost line, reuse of the parts that finished,
--resume of the one that was interrupted, the other parts run after one fails, and the worst exit code
(adbs_lab/driver/outcome.py: worst; an interruption stops at once). Each part is a study exactly as its own script runs
it: a Plan and its options, run by adbs_lab/driver/run.py.

    parts = [compose.Part("ablation", *ablation.plan(opts), title="..."), ...]
    whole = compose.Composite("paper", "embedded", parts, shown=storage, tracking_uri=uri)
    checked = whole.check()                # every part's preflight; what each folder holds
    whole.print_cost(checked, estimate)    # one line, then a line a part
    codes = whole.run(checked)             # {part: exit code} of the parts that ran
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from typing import Callable, Collection

from adbs.config import Config, ConfigError
from adbs.exits import FAILED, INTERRUPTED, REFUSED, Exit
from adbs_lab.stores import tracking_store
from adbs_lab.driver import interrupts
from adbs_lab.driver.preflight import check_name_free, held, study
from adbs_lab.driver.prepared import fail
from adbs_lab.driver.run import run
from adbs_lab.driver.session import env_defaults
from adbs_lab.driver.options import StudyInputError, StudyOptions
from adbs_lab.driver.plan import Plan
from adbs_lab.stores.study_folder import StudyFolder

__all__ = ["Part", "Checked", "Composite", "FINISHED", "UNFINISHED", "reportable", "total", "to_run",
           "interruptible"]

FINISHED, UNFINISHED = "finished", "unfinished"
"""What a part's folder holds of this very part (adbs_lab/driver/preflight.py: held): reused, continued; anything
else (None: nothing of it; "claimed": a run stopped before its first trial, nothing to continue) runs afresh."""


@dataclass
class Part:
    name: str
    plan: Plan
    opts: StudyOptions
    title: str = ""
    """What the part reproduces, printed when it starts."""
    base_free: tuple[str, ...] = ()
    """Config fields its configurations differ in without changing the base session (the k-shot grid's ways and
    shots): configurations differing only in them share one base session (base_cache), counted once in the cost."""


@dataclass
class Checked:
    """A part that passed its preflight: its size, the base epochs it trains, and what its folder holds."""

    part: Part
    trials: int
    base_epochs: int
    state: str | None
    fewest: int | None = None
    """With --seeds auto, the trials of the first batch alone (the study may stop there); None: `trials` exactly."""
    bases: list[Config] = field(default_factory=list)
    """One config per base session the part trains (what `base_epochs` counts; studies/gpu_hours.py times them)."""

    @property
    def count(self) -> str:
        """`24 trials`, or with --seeds auto the range `9-24 trials` (first batch to the cap)."""
        return f"{self.fewest}-{self.trials} trials" if self.fewest is not None else f"{self.trials} trials"

    @property
    def name(self) -> str:
        return self.part.name

    @property
    def doing(self) -> str:
        doing: dict[str | None, str] = {FINISHED: "finished earlier: reused",
                                        UNFINISHED: "interrupted earlier: continued"}
        return doing.get(self.state, "to run")


@dataclass
class Composite:
    name: str
    """Printed before each line of its own ("paper: ...") and in every refusal ("paper, hosts: ...")."""
    label: str
    """Which composite this is ("paper (embedded): ...")."""
    parts: list[Part]
    shown: str
    """Where the parts' folders are, as printed (an object store's URL without credentials)."""
    tracking_uri: str
    storage: str = ""
    """Where the parts' folders are (their --storage), for the running-copy check and `parent_runs`."""

    @property
    def title(self) -> str:
        return f"{self.name} ({self.label})"

    def check(self) -> list[Checked]:
        """Every part's preflight checks and what its folder holds, before any part trains; writes nothing. Bad
        input, or another copy of a part running on the same storage: exit 2 naming the part."""
        env_defaults()
        checked, where = [], "tracking store"
        try:
            tracking_store.tracking_problem(self.tracking_uri)
            for part in self.parts:
                where = part.name  # named in the error
                checked.append(self._check(part))
        except (ConfigError, StudyInputError, tracking_store.TrackingError) as e:
            fail(f"{self.name}, {where}: {e}")
        return checked

    def _check(self, part: Part) -> Checked:
        p = study(part.plan, part.opts)  # the part typed once, as its own run's preflight types it
        bases = {repr(sorted((k, v) for k, v in c.to_dict().items() if k not in part.base_free)): c
                 for c in p.configs}.values() if part.base_free else p.configs
        where = p.where  # the part's folder: its --storage is this composite's storage (studies/paper.py)
        try:
            state = held(p)
            busy = where.running()
            if busy and state != FINISHED:
                raise StudyInputError(busy)
            if state not in (FINISHED, UNFINISHED):  # a new study, as the part's own run will check it (no --resume):
                # its name free in the Optuna storage
                check_name_free(p.run.optuna_storage, where, p.fingerprint)
        finally:
            where.cleanup()  # for a URL, StudyFolder makes a staging folder even to read
        first, most = p.seeding.trials(p.n_configs)
        fewest = first if first != most else None  # a seed list: exactly its trials
        return Checked(part, p.total, sum(c.base_epochs for c in bases), state, fewest, list(bases))

    def print_cost(self, checked: list[Checked], estimate: Callable[[Checked], str], seeds) -> None:
        """One line for the whole (trials in all, to run, seeds, where), then one a part: its trials, `estimate`'s
        time and whether it runs, is reused or continued."""
        auto = any(c.fewest is not None for c in checked)
        fewest = sum(c.fewest if c.fewest is not None else c.trials for c in checked)
        size = f"{fewest}-{total(checked)} trials" if auto else f"{total(checked)} trials"
        said = "auto: 0 1 2, then more where a comparison is unresolved" if auto else " ".join(map(str, seeds))
        print(f"{self.title}: {len(checked)} studies, {size}, {to_run(checked)} to run at most (seeds {said}), "
              f"into {self.shown}" if auto else f"{self.title}: {len(checked)} studies, {size}, {to_run(checked)} "
              f"to run (seeds {said}), into {self.shown}")
        for c in checked:
            print(f"  {c.name:<12} {c.count:>9}  {estimate(c)}  [{c.doing}]", flush=True)

    def print_dry_run(self, checked: list[Checked]) -> None:
        auto = any(c.fewest is not None for c in checked)
        fewest = sum(c.fewest if c.fewest is not None else c.trials for c in checked)
        print(f"dry run: study {self.title}, {f'{fewest}-' if auto else ''}{total(checked)} trials in "
              f"{len(checked)} studies checked; nothing was started and no result written", flush=True)

    def run(self, checked: list[Checked]) -> dict[str, int]:
        """The parts one after another, each its own study: a finished one reused, an interrupted one continued
        (--resume); one that fails does not stop the others, an interrupted one (130) stops the whole at once."""
        codes = {}
        for c in checked:
            if c.state == FINISHED:
                print(f"\n{self.name}: {c.name} finished earlier in {self.shown}; reused", flush=True)
                continue
            print(f"\n{self.name}: {c.name} ({c.part.title})", flush=True)
            try:
                ran = run(c.part.plan, c.part.opts.replace(resume=c.state == UNFINISHED))
                assert ran is not None, "run returns None only for --dry-run, which never runs the parts"
                codes[c.name] = ran.code
            except SystemExit as e:  # refused (2), failed after it started (1), or interrupted (130)
                code = e.announce() if isinstance(e, Exit) else e.code  # the part's message, as its script shows it
                codes[c.name] = code if isinstance(code, int) else FAILED
                if codes[c.name] == INTERRUPTED:
                    print(f"\n{self.name}: interrupted in {c.name}; rerun the same command to continue (finished "
                          "parts are reused)", file=sys.stderr, flush=True)
                    raise Exit(INTERRUPTED) from None
        return codes

    def parent_runs(self, names: Collection[str] | None = None) -> dict[str, str]:
        """{part: its MLflow parent run} of the parts that have one, of those `names` (default: every part); a part
        refused at its own checks has none of its own (its folder may hold an earlier study's: leave it out)."""
        runs = {}
        for part in self.parts:
            if names is not None and part.name not in names:
                continue
            where = StudyFolder(self.storage, part.plan.name + part.opts.folder)
            try:
                run_id = json.loads(where.read_text(tracking_store.RUNS_FILE) or "{}").get("parent")
            finally:
                where.cleanup()  # for a URL, StudyFolder makes a staging folder even to read
            if run_id:
                runs[part.name] = run_id
        return runs


def interruptible(name: str, main: Callable[[], int]) -> int:
    """`main`'s exit code with one handler for Ctrl-C and SIGTERM from its first line to its last (the parts' own
    runs share it: adbs_lab/driver/interrupts.py): interrupted outside a part (checking the parts, drawing the
    report), one line and 130, never a traceback or death by the signal."""
    with interrupts.handling() as ints:
        try:
            return main()
        except KeyboardInterrupt:
            print(f"\n{name}: interrupted ({ints.name}); rerun the same command to continue (finished parts are "
                  "reused)", file=sys.stderr, flush=True)
            return INTERRUPTED


def reportable(checked: list[Checked], codes: dict[str, int]) -> list[str]:
    """The parts a report may show: reused (finished earlier) or run by this command, not refused (exit 2: it ran
    nothing, and its folder holds at most an earlier study)."""
    return [c.name for c in checked if c.state == FINISHED or codes.get(c.name, REFUSED) != REFUSED]


def total(checked: list[Checked]) -> int:
    """Trials of every part, finished or not."""
    return sum(c.trials for c in checked)


def to_run(checked: list[Checked]) -> int:
    """Trials of the parts this command runs (a finished part is reused)."""
    return sum(c.trials for c in checked if c.state != FINISHED)
