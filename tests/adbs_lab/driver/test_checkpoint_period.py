"""How often Tune saves its experiment state (adbs_lab/driver/session.py): 2 s for small studies, in proportion to
the trials beyond 100 (the state holds every trial), and the user's own TUNE_GLOBAL_CHECKPOINT_S always wins."""

import os

from adbs_lab.driver import session


def test_the_period_is_two_seconds_up_to_100_trials_then_grows_with_the_state():
    assert [session.checkpoint_period(n) for n in (1, 12, 100, 1000, 5000)] == ["2", "2", "2", "20", "100"]


def test_the_users_own_period_wins_and_each_study_gets_its_own(monkeypatch):
    monkeypatch.setattr(session, "_USER_PERIOD", None)
    monkeypatch.delenv(session.PERIOD_ENV, raising=False)
    session.env_defaults()
    session.set_checkpoint_period(1000)
    assert os.environ[session.PERIOD_ENV] == "20"
    session.env_defaults()  # a second study of the same process (studies/paper.py): its own size decides
    session.set_checkpoint_period(10)
    assert os.environ[session.PERIOD_ENV] == "2"

    monkeypatch.setattr(session, "_USER_PERIOD", None)
    monkeypatch.setenv(session.PERIOD_ENV, "auto")
    session.env_defaults()
    session.set_checkpoint_period(1000)
    assert os.environ[session.PERIOD_ENV] == "auto"
