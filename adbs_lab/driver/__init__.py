"""The study driver, one job a module. A study script imports adbs_lab/study.py (`Plan`, `main`, `run`: the
public entry point, which names each step's function); several studies run as one through `compose`. The
package itself imports nothing, so `from adbs_lab.driver import launch` is the module.

    flags      the checks of the flags that need no heavy library (run before the driver loads, and by preflight)
    prepared   Study (what the preflight decided, handed to every later step), fail, bad_input (exit 2)
    preflight  every check before the first trial, nothing written; --dry-run is it and one line (validate, size,
               held: what a study's folder holds of this very study)
    resume     the checks of --resume and what it keeps of the interrupted run (part of the preflight)
    claim      the study's name taken in the Optuna storage (created once: another run's name, exit 2) and its
               folder under its lock: earlier results moved aside, or --resume's files fetched
    session    the process's environment, the Ray session, SIGTERM as Ctrl-C, what a full disk looks like
    launch     Ray and resources per trial (cluster_slots, before the claim), Optuna's searcher and pruner, the
               MLflow tracker, Ray Tune's fit
    summarise  tables, figures, report, upload, and the exit code (adbs_lab/driver/outcome.py)
    run        preflight -> cluster_slots -> claim -> launch -> summarise (`run`, `main`, `dry_run`)
    compose    several studies, one plan, one cost line, one preflight, reuse of what finished (studies/paper.py)
"""

__all__ = ["flags", "prepared", "preflight", "resume", "claim", "session", "launch", "summarise", "run", "compose"]
