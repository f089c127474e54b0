"""The search: Optuna samples configurations and prunes base sessions, inside Ray Tune.

Ray's OptunaSearch hard-codes a no-op pruner, reports Tune's `training_iteration` as the
step, and tells a trial stopped by Tune as COMPLETE with its cut-short value. Two pieces
replace that:

- `StudySearch`, an OptunaSearch subclass: asks Optuna for one configuration per Optuna
  trial, runs it over the seeds its seed policy names (adbs_lab/search/seeds/: one Tune trial
  per seed; Optuna is told the mean over seeds, like ray.tune.search.Repeater), never tells a
  placeholder as a final value, and tells FAIL for failed trials. Each seed's value goes on its configuration's
  Optuna trial as a user attribute as soon as the seed ends (`_show_seed`), for optuna-dashboard to show.
- `BaseEpochStopper`, a Tune Stopper: on every *base-epoch* report it calls Optuna's
  trial.report(base val acc, step=epoch) and should_prune(); on a prune it tells Optuna
  PRUNED and stops the Tune trial. Session and summary reports are never pruned on.

Both talk to Optuna through the persisted storage only (looked up by URL in this process:
adbs_lab/search/optuna_storage.py), so they stay consistent after Tuner.restore, which unpickles
them as separate objects.

A trial ends once: Tune tells the searcher before its callbacks (ray/tune/execution/tune_controller.py:
stop_trial, _process_trial_failure), so `StudySearch.on_trial_complete` reads the trial's Optuna state (the
only read of it), classifies the trial (trial_records.classify) and keeps that record; the MLflow tracker and the
progress line ask `StudySearch.ended` for it, and the tracker writes it to the study's runs file, where the
tables read it (adbs_lab/driver/summarise.py).

The searcher holds no seed mode of its own: it asks its policy which seeds a new configuration runs (`opening`),
records each trial that ends for it (`Ended`), applies what the policy's standing asks (more seeds, a contender's
copy), prints each new look and tells Optuna a configuration once the policy is done with it: a configuration of a
seed list, or a race's screening sample, once its seeds have ended; a row of --seeds auto, or a race's contender,
when the standing makes it final (adbs_lab/search/seeds/policy.py: Opening.final).
"""

from __future__ import annotations

import dataclasses
import math
import os
import pickle
import warnings
from typing import Any, Sequence

import optuna
from optuna.trial import TrialState
from ray.tune.search import Searcher
from ray.tune.search.optuna import OptunaSearch
from ray.tune.stopper import Stopper
from ray.tune.utils.util import unflatten_dict

from adbs.config import FIELDS, Config, from_dict
from adbs_lab.records import metrics_keys as K
from adbs_lab.records.metrics_keys import OPTUNA_TRIAL_KEY
from adbs_lab.records.objectives import DEFAULT, Objective
from adbs_lab.records.trial_records import classify, objective
from adbs_lab.records.tune_keys import (CONFIG_KEY, RACE_OF, SEED_KEY, SEEDS_ATTR, SEEDS_DONE_ATTR, SEEDS_MEAN_ATTR,
                                       seed_attr)
from adbs_lab.search import old_state, orphans, shadows
from adbs_lab.search.optuna_storage import _LiveStudy, name_metrics, optuna_storage, stops_when_down, tell
from adbs_lab.search.seeds.fixed import SeedList
from adbs_lab.search.seeds.policy import FINISHED, Ended, Opening, SeedPolicy, Standing
from adbs_lab.search.space import TrialMaker
from adbs_lab.stores.study_folder import rebound, snapshot_into

__all__ = ["StudySearch", "BaseEpochStopper", "StudyGridSampler"]


class StudySearch(_LiveStudy, OptunaSearch):
    def __init__(self, space: dict[str, optuna.distributions.BaseDistribution], *, storage_url: str, study_name: str,
                 sampler: optuna.samplers.BaseSampler, policy: SeedPolicy | None = None,
                 trial: TrialMaker | None = None, points_to_evaluate: list[dict] | None = None,
                 snapshot: dict[str, str] | None = None, objectives: tuple[Objective, ...] = DEFAULT) -> None:
        """`policy`: which seeds each configuration runs (adbs_lab/search/seeds/; None: seed 0 alone). `trial`:
        makes each trial's Config from its point (adbs_lab/search/space.py: TrialMaker, its threads set by launch;
        None: the defaults of Config). `snapshot`: {name: local file} copied beside the searcher state each time
        Tune saves it (study_folder.snapshot_into), so a study on an object store uploads its optuna.db with the
        trial list it belongs to. `objectives`: what Optuna is told (--objectives; adbs_lab/records/objectives.py),
        each a mean over the configuration's seeds."""
        self._objectives = tuple(objectives)
        if self._objectives != DEFAULT:
            # OptunaSearch creates the study with one direction from its metric and mode, which stay K.OBJECTIVE/max:
            # Tune checks that every report carries the searcher's metric (strict metric checking), and only
            # K.OBJECTIVE rides on every report (trainable.PLACEHOLDER). Created here first with a direction per
            # objective, the study is loaded by OptunaSearch as it is (create_study(load_if_exists=True)). A study's
            # driver has created it already (`create_study`, before its folder is claimed); this is for other callers.
            optuna.create_study(storage=optuna_storage(storage_url), study_name=study_name, sampler=sampler,
                                directions=[o.optuna_direction for o in self._objectives], load_if_exists=True)
        self._storage_url = storage_url
        self._snapshot = dict(snapshot or {})
        self._policy: SeedPolicy = policy or SeedList((0,))
        self._trial = trial or TrialMaker(Config())
        self._groups: dict[int, dict[str, Any]] = {}  # Optuna trial number -> its configuration's record (_open)
        self._by_unit: dict[str, int] = {}  # a unit the policy's standing decides on -> its Optuna trial number
        self._number: dict[str, int] = {}  # Tune trial id -> its Optuna trial number
        self._seed_of: dict[str, int] = {}  # Tune trial id -> its seed
        self._ended: dict[str, str] = {}  # Tune trial id -> its state when it ended (trial_records.classify)
        self._record: dict[str, Ended] = {}  # Tune trial id -> what the policy reads of it
        self._said = 0  # looks printed
        super().__init__(
            space, metric=K.OBJECTIVE, mode=K.MODE, sampler=sampler, study_name=study_name,
            storage=optuna_storage(storage_url), points_to_evaluate=points_to_evaluate,
        )
        self._live = None
        name_metrics(optuna_storage(storage_url), study_name, self._objectives)

    # Pickled by Tune with the tuner and in searcher checkpoints: no live DB handles; the trial maker travels with it
    # (a Config and the study's rows), so a resumed study makes its trials' Configs from the base it started with.
    def __getstate__(self) -> dict[str, Any]:
        # _ot_study/_ot_trials/_storage are OptunaSearch's own attributes (no public accessor): a live Study
        # bound to the storage of the driver that pickled it. _storage (Optuna's RDBStorage) is rebuilt from
        # _storage_url, which names this driver's database on --resume (study_folder.rebound).
        return {k: v for k, v in self.__dict__.items()
                if k not in ("_live", "_ot_study", "_ot_trials", "_storage", "_restored_policy")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(old_state.upgrade(state))  # a searcher pickled by earlier code: adbs_lab/search/old_state.py
        self._live, self._ot_study, self._ot_trials = None, None, {}
        self._storage_url = rebound(self._study_name, "optuna_url", self._storage_url)
        self._restored_policy = self._policy
        pause = rebound(self._study_name, "pause", None)  # --more-seeds: the looks up to the next pause
        if pause is not None and getattr(self._policy, "pause", pause) != pause:
            self._policy = dataclasses.replace(self._policy, pause=pause)  # type: ignore[type-var]  # a dataclass
        self._storage = optuna_storage(self._storage_url)
        if self._snapshot:  # the files live in the study's (rebound) staging folder
            self._snapshot = {k: os.path.join(rebound(self._study_name, "study_dir", os.path.dirname(v)), k)
                              for k, v in self._snapshot.items()}

    def save(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "wb") as f:
            pickle.dump(self.__getstate__(), f)
        if self._snapshot:
            snapshot_into(os.path.dirname(checkpoint_path), self._snapshot)

    def restore(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "rb") as f:
            self.__setstate__(pickle.load(f))
        self._adopt_orphans()
        if self._policy is not self._restored_policy:  # --more-seeds: the standing asks for the next looks' seeds
            for unit, want in self._policy.wanted(self.standing()).items():
                self._run_seeds(unit, want)

    def _adopt_orphans(self) -> None:
        """The Optuna trials a driver killed before Tune saved this state had asked for, RUNNING or already told
        (adbs_lab/search/orphans.py: why they are adopted and run again): each becomes this searcher's again, with
        its own number, parameters and seeds, every seed still to run (none of its Tune trials was saved), so Optuna
        gets no second trial for it and the sampler draws nothing for it. Left alone, a told one is a sample Optuna
        holds and the study never ran (and its grid point runs twice to fill the budget), and a RUNNING one stays
        taken for good. One told already is not told again (a configuration is told only while RUNNING)."""
        found = orphans.left_behind(optuna_storage(self._storage_url), self._study_name, set(self._groups))
        for t in found:
            g = self._groups[t.number] = orphans.group(t, self._policy, seed_axis=self._seed_axis())
            if g["final"]:
                self._by_unit[g["row"]] = t.number
        if found:
            assert self._sampler is not None, "StudySearch is always built with a sampler"
            orphans.draw_afresh(self._sampler)

    def set_search_properties(self, metric: str | None, mode: str | None, config: dict, **spec: Any) -> bool:
        """Tune hands over the param space on every run, --resume included. A searcher pickled before it held its
        trial maker (it kept only the rows) takes that param space as the maker's base, as it did then."""
        if "_trial" not in self.__dict__:
            self._trial = TrialMaker(from_dict({k: v for k, v in (config or {}).items() if k in FIELDS}),
                                     self.__dict__.get("_rows"))
        return super().set_search_properties(metric, mode, config, **spec)

    def _study(self, **kwargs: Any) -> optuna.Study:
        return super()._study(sampler=self._sampler)

    def _seed_axis(self) -> bool:
        """A study begun when grids had the seed as an axis (its pickled space holds it) goes on that way: its
        configurations carry their seed in their point, and run once."""
        return isinstance(self._space, dict) and SEED_KEY in self._space

    @stops_when_down
    def suggest(self, trial_id: str) -> dict | str | None:
        # A configuration's seeds are handed out together (the lowest-numbered configuration with seeds left first:
        # the one open, or one a killed driver left behind); if it gets pruned meanwhile, its remaining seeds still
        # run but BaseEpochStopper stops them at their first base epoch, so the budget (configurations x seeds) and
        # the Optuna trial's bookkeeping stay exact.
        number = next((n for n, g in sorted(self._groups.items()) if g["seeds_left"] or g.get(orphans.RERUN)), None)
        if number is None:
            step = self._policy.opening(self.standing(), sum(g.get(RACE_OF) is None for g in self._groups.values()))
            if step == FINISHED:
                return Searcher.FINISHED
            if not isinstance(step, Opening):
                return None  # the batch under way must end before the next look
            number = self._open(step)
        self._groups[number].pop(orphans.RERUN, None)
        return self._hand_out(trial_id, number)

    def _open(self, step: Opening, copy_of: int | None = None, unit: str | None = None) -> int:
        """Ask Optuna for a new configuration (or, `copy_of`, enqueue that screened configuration's parameters and
        ask for it: a race's contender `unit`) and keep its record."""
        study = self._study()
        if copy_of is not None:
            study.enqueue_trial(self._groups[copy_of]["params"], user_attrs={RACE_OF: copy_of})
        # OptunaSearch also takes a list or a define-by-run function; StudySearch passes it a dict of Optuna
        # distributions, which OptunaSearch keeps as a (flattened) dict
        ot_trial = study.ask(fixed_distributions=self._space)  # type: ignore[arg-type]
        # A configuration runs over its seeds, one Optuna trial for all of them: a seed is no parameter (it would show
        # as one in Optuna's importance and plots), so the trial keeps its seeds as a user attribute.
        seeds = [] if self._seed_axis() else list(step.seeds)
        if seeds:
            ot_trial.set_user_attr(SEEDS_ATTR, seeds)
        params = dict(ot_trial.params)
        self._groups[ot_trial.number] = {"params": params, "seeds_left": list(seeds), "members": {},
                                         "seeds": list(seeds), "row": unit or self._policy.label(params), "told": False,
                                         "final": step.final, **({RACE_OF: copy_of} if copy_of is not None else {})}
        if step.final:
            self._by_unit[self._groups[ot_trial.number]["row"]] = ot_trial.number
        return ot_trial.number

    def _hand_out(self, trial_id: str, number: int) -> dict:
        """Tune trial `trial_id` runs configuration `number`'s next seed (or the configuration, seed in its point)."""
        g = self._groups[number]
        params = dict(g["params"])
        if g["seeds_left"]:
            params[SEED_KEY] = g["seeds_left"].pop(0)
            self._seed_of[trial_id] = params[SEED_KEY]
        if g.get(RACE_OF) is not None:  # a race's seed: BaseEpochStopper never prunes it
            params[RACE_OF] = g[RACE_OF]
        g["members"][trial_id] = None
        self._number[trial_id] = number
        params[OPTUNA_TRIAL_KEY] = number
        config = unflatten_dict(params)
        # The trial's Config, made once, here, by the study's one trial maker (its base is Tune's param space); the
        # trainable, the tracker and the tables read it (tune_keys.trial_config).
        config[CONFIG_KEY] = self._trial.config(config)
        return config

    def on_trial_result(self, trial_id: str, result: dict) -> None:
        """No-op: BaseEpochStopper reports base epochs; Tune's iteration is not a step Optuna should see."""

    @stops_when_down
    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        number = self._number.get(trial_id)
        if number is None:
            return
        g = self._groups[number]
        # The one read of this trial's Optuna state: the stopper tells Optuna PRUNED before Tune ends the trial
        # (and a shadow, pruned but run on to its end, is PRUNED to the study: adbs_lab/search/shadows.py).
        held = self._state(number)
        self._ended[trial_id] = classify(result, error=error, pruned=held == TrialState.PRUNED,
                                         shadow=held == TrialState.PRUNED and self._shadow(number, trial_id))
        g["members"][trial_id] = (self._ended[trial_id], self._values(result))
        if held == TrialState.RUNNING:  # a finished trial's attributes cannot be written (and it has its value)
            self._show_seed(number, trial_id)
        self._look(trial_id, result)
        if g["final"] or any(v is None for v in g["members"].values()) or g["seeds_left"]:
            return  # told when the policy makes it final; or other seeds of this configuration still to come
        if held != TrialState.RUNNING:
            return  # told already (the stopper told PRUNED)
        self._tell_group(number)

    def _look(self, trial_id: str, result: dict | None) -> None:
        """A trial ended: keep what the policy reads of it, then apply the standing: the seeds it asks for (a
        contender's configuration made on first need), each new look printed, the configurations it is done with
        told."""
        number, seed, state = self._number.get(trial_id), self._seed_of.get(trial_id), self._ended.get(trial_id)
        row = None if number is None else self._groups[number]["row"]
        if row is None or seed is None or state not in K.ENDED:
            return
        values = self._values(result) if state == K.COMPLETE else None
        self._record[trial_id] = Ended(row, seed, state, self._policy.value(state, result, values))
        standing = self.standing()
        for unit, want in self._policy.wanted(standing).items():
            self._run_seeds(unit, want)
        for look in standing.looks[self._said:]:
            print(f"[{self._study_name}] {self._policy.look_line(look)}", flush=True)
        self._said = len(standing.looks)
        for n in sorted(self._by_unit.values()):
            g = self._groups[n]
            if g["told"] or not standing.final(g["row"]) or any(v is None for v in g["members"].values()):
                continue
            g["told"] = True
            if self._state(n) == TrialState.RUNNING:  # not told PRUNED by the stopper, nor before a --resume
                self._tell_group(n)

    def _show_seed(self, number: int, trial_id: str) -> None:
        """Configuration `number`'s seed run by Tune trial `trial_id` ended: its value goes on the configuration's
        Optuna trial at once, with how many of its seeds ended and their mean so far, so optuna-dashboard shows a
        grid's rows as their seeds end (a row is told only when all its seeds have, or when --seeds auto's looks make
        it final: many minutes of a RUNNING trial without a value otherwise).

        User attributes, not trial.report(value, step=seed index): the intermediate values are the pruner's base
        epochs (BaseEpochStopper reports step=epoch on the same trial, and a median pruner compares every trial's
        value at a step), so seed values there would be read as base accuracies wherever a pruner runs; report()
        also keeps the first value of a step (a seed rerun after a kill could not replace its value) and refuses
        a study of several objectives. An attribute per seed (tune_keys.seed_attr) is written again by the seed's
        rerun (--resume), so none is duplicated or lost; the count and the mean are over the seeds this searcher
        saw end (`members`, kept with its state), the same mean `_tell_group` tells."""
        seed = self._seed_of.get(trial_id)
        if seed is None:
            return  # a configuration whose seed is a grid axis runs once: its value comes with its end
        g = self._groups[number]
        state, values = g["members"][trial_id]
        if state not in K.ENDED:
            return  # interrupted: it runs again
        storage, trial_id_ = optuna_storage(self._storage_url), self._storage_trial_id(number)
        shown = _shown(values) if state == K.COMPLETE and values else state
        storage.set_trial_user_attr(trial_id_, seed_attr(seed), shown)
        ended = [m for m in g["members"].values() if m is not None and m[0] in K.ENDED]  # None: still running
        done = [v for st, v in ended if st == K.COMPLETE and v]
        storage.set_trial_user_attr(trial_id_, SEEDS_DONE_ATTR, len(ended))
        storage.set_trial_user_attr(trial_id_, SEEDS_MEAN_ATTR, _shown(_mean_over(done)) if done else None)

    def _run_seeds(self, unit: str, want: list[int]) -> None:
        """`unit` runs the seeds `want`: more handed out to its configuration (a copy of its screened one made first,
        where the policy copies)."""
        number = self._by_unit.get(unit)
        if number is None:
            if not want or not self._policy.copies:
                return
            screen = next(n for n, g in sorted(self._groups.items()) if g.get(RACE_OF) is None and g["row"] == unit)
            number = self._open(Opening([], final=True), copy_of=screen, unit=unit)
        g = self._groups[number]
        more = [s for s in want if s not in g["seeds"]]
        if more:
            g["seeds"] += more
            g["seeds_left"] += more
            if self._state(number) == TrialState.RUNNING:  # told before a --resume replays this look: kept
                optuna_storage(self._storage_url).set_trial_user_attr(self._storage_trial_id(number), SEEDS_ATTR,
                                                                      list(g["seeds"]))

    def standing(self) -> Standing:
        """Where the seeds stand: the policy's standing of the trials that ended, in the order they ended."""
        return self._policy.standing(list(self._record.values()))

    def _tell_group(self, number: int) -> None:
        """Tell Optuna configuration `number`'s value over every seed it ran: the mean per objective, or PRUNED /
        FAIL."""
        g = self._groups[number]
        states = [state for state, _ in g["members"].values()]
        values = [value for _, value in g["members"].values() if value is not None]
        study = self._study()
        if K.PRUNED in states:
            tell(study, number, state=TrialState.PRUNED)
        elif K.FAILED in states or K.DIVERGED in states or not values:
            # a configuration with a failed or diverged seed has no honest mean: Optuna holds it FAIL, as every
            # table does
            tell(study, number, state=TrialState.FAIL)
        else:
            # one mean over the seeds per objective; an objective the trial could not measure (NaN: e.g. novel
            # accuracy without an incremental session) leaves the configuration without a value: FAIL
            means = _mean_over(values)
            if not all(math.isfinite(m) for m in means):
                tell(study, number, state=TrialState.FAIL)
            else:
                tell(study, number, means[0] if len(means) == 1 else means)

    def _values(self, result: dict | None) -> list[float] | None:
        """The trial's value of each objective when it completed, else None."""
        obj = objective(result)
        if obj is None:
            return None
        assert result is not None, "objective() has a value only from a report"
        return [obj if o.key == K.OBJECTIVE else float(result.get(o.key, math.nan)) for o in self._objectives]

    @stops_when_down
    def ended(self, trial) -> str:
        """How Tune trial `trial` ended, as on_trial_complete classified it. Tune tells this searcher first;
        only a trial it did not tell (one continued by --resume after an error: Tune's ConcurrencyLimiter
        forgot it) is classified here, with the same single read of its Optuna state, and recorded for the policy."""
        if trial.trial_id not in self._ended:
            number = (trial.config or {}).get(OPTUNA_TRIAL_KEY)
            pruned = number is not None and self._state(int(number)) == TrialState.PRUNED
            shadow = pruned and number is not None and self._shadow(int(number), trial.trial_id)
            self._ended[trial.trial_id] = classify(trial.last_result, pruned=pruned, shadow=shadow)
            if trial.trial_id in self._number:
                self._look(trial.trial_id, trial.last_result)
        return self._ended[trial.trial_id]

    def reopen(self, trial_id: str) -> None:
        """Trial `trial_id` runs again (restored by Tune): how it ended before is no longer how it ends."""
        self._ended.pop(trial_id, None)

    def looks_taken(self) -> int:
        """The looks of the policy (a grid's or a race's) taken so far; 0 for a seed list."""
        return self._said


class StudyGridSampler(optuna.samplers.GridSampler):
    """Optuna's GridSampler, less its after_trial: that reads every trial of the study (its search space and grid
    point) to decide whether to call study.stop(), which only ends study.optimize()'s loop and raises outside it
    (`tell`). The study asks and tells itself and Ray Tune's num_samples ends it, so the read did nothing but grow
    with the study: 0.04 s per trial at 230 trials, 0.1 s at 500 (py-spy on bench/scale_study.py's driver,
    docs/benchmarks.md), the study's work growing with trials squared. Which point a trial gets is unchanged
    (before_trial, the same seed). A study started before this class existed goes on with the sampler it pickled."""

    def after_trial(self, study: optuna.Study, trial: optuna.trial.FrozenTrial, state: TrialState,
                    values: Sequence[float] | None) -> None:
        return None


def _mean_over(values: Sequence[Sequence[float]]) -> list[float]:
    """The mean of each objective over the seeds' `values` (one list per seed, one value per objective)."""
    return [sum(v[i] for v in values) / len(values) for i in range(len(values[0]))]


def _shown(means: Sequence[float]) -> float | None | list[float | None]:
    """A value as a user attribute holds it: one number for one objective, else a list; a non-finite one as None (JSON
    has no NaN, and optuna-dashboard reads the attributes as JSON)."""
    shown = [float(m) if math.isfinite(m) else None for m in means]
    return shown[0] if len(shown) == 1 else shown


def _seed(config: dict) -> int | None:
    """A trial's seed as JSON takes it (a grid's seed axis may hand a numpy integer), None without one."""
    seed = config.get(SEED_KEY)
    return None if seed is None else int(seed)


class BaseEpochStopper(_LiveStudy, Stopper):
    """Tune Stopper that runs an Optuna pruner on base-session validation accuracy (never on sessions).

    On every base-epoch report it reads the Optuna trial's state: another seed of the same configuration may
    have been pruned meanwhile (stop this one too), or the configuration was told already (nothing to report).
    """

    def __init__(self, *, storage_url: str, study_name: str, pruner: optuna.pruners.BasePruner,
                 shadow_share: float = 0.0, shadow_seed: int = 0) -> None:
        """`shadow_share`: the share s of the trials the pruner stops that run on to the end as shadows, drawn with
        `shadow_seed` (the study's sampler seed; adbs_lab/search/shadows.py)."""
        self._storage_url = storage_url
        self._study_name = study_name
        self._pruner = pruner
        self._shadow_share = shadow_share
        self._shadow_seed = shadow_seed

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "_live"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        from adbs_lab.stores.study_folder import rebound

        self.__dict__.update(state)
        self._live = None
        self._storage_url = rebound(self._study_name, "optuna_url", self._storage_url)

    def _study(self, **kwargs: Any) -> optuna.Study:
        return super()._study(pruner=self._pruner)

    @stops_when_down
    def __call__(self, trial_id: str, result: dict) -> bool:
        config = result.get("config") or {}
        number = config.get(OPTUNA_TRIAL_KEY)
        if number is None or config.get(RACE_OF) is not None:
            return False  # a race's seed is a paired value, never pruned (adbs_lab/search/seeds/race.py)
        storage, trial_id_ = optuna_storage(self._storage_url), self._storage_trial_id(number)
        held = storage.get_trial(trial_id_)
        if held.state == TrialState.PRUNED:
            if shadows.is_shadow(held, trial_id):  # runs on to its end, unseen by the pruner and the sampler
                self._follow(number, result)
                return False
            return True  # pruned, by this seed's report or another seed's of the same configuration
        if held.state == TrialState.RUNNING and result.get(K.REPORT_KIND) == K.KIND_SUMMARY:
            novel = result.get(K.SUMMARY + shadows.NOVEL_KEY)
            if K.finite(novel):  # the premise's novel accuracy of a completed configuration, per seed
                storage.set_trial_user_attr(trial_id_, f"{shadows.NOVEL_KEY}:{_seed(config) or 0}",
                                            float(novel))
            return False
        # Only base-epoch reports are pruned on, never incremental sessions: pruning must not peek at them.
        if held.state != TrialState.RUNNING or result.get(K.REPORT_KIND) != K.KIND_BASE:
            return False
        value = result.get(K.BASE_PRUNE_VALUE)
        if not K.finite(value):
            return False
        study = self._study()
        # Optuna has no public way to reopen a trial by number outside study.ask(); Trial(study, id) is what
        # ask() itself builds (optuna/study/study.py), so the pruner sees the trial as it would in optimize().
        trial = optuna.trial.Trial(study, trial_id_)
        step = int(result[K.BASE_STEP])
        with warnings.catch_warnings():  # other seeds of this configuration reported this step already
            warnings.simplefilter("ignore", UserWarning)
            trial.report(float(value), step=step)
        if not trial.should_prune():
            return False
        shadow = shadows.chosen(getattr(self, "_shadow_seed", 0), number, getattr(self, "_shadow_share", 0.0))
        if shadow:  # recorded before PRUNED is told: a finished trial's attributes cannot be written
            shadows.start_record(storage, storage.get_study_id_from_name(self._study_name), trial_id_, number,
                                 tune_trial=trial_id, seed=_seed(config), step=step, value=float(value))
        tell(study, number, state=TrialState.PRUNED)
        return not shadow

    def _follow(self, number: int, result: dict) -> None:
        """A shadow's base epochs and its end go to its study record (adbs_lab/search/shadows.py)."""
        storage = optuna_storage(self._storage_url)
        study_id = storage.get_study_id_from_name(self._study_name)
        kind = result.get(K.REPORT_KIND)
        if kind == K.KIND_BASE and K.finite(result.get(K.BASE_PRUNE_VALUE)):
            shadows.follow(storage, study_id, number, step=int(result[K.BASE_STEP]),
                           value=float(result[K.BASE_PRUNE_VALUE]))
        elif kind == K.KIND_SUMMARY and K.finite(result.get(K.OBJECTIVE)):
            novel = result.get(K.SUMMARY + shadows.NOVEL_KEY)
            shadows.follow(storage, study_id, number, objective=float(result[K.OBJECTIVE]),
                           novel=float(novel) if K.finite(novel) else None)

    def stop_all(self) -> bool:
        return False
