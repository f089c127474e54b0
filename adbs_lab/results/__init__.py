"""What a study found, drawn from its trials: tables, comparisons, figures, the trade-off and Pareto front,
importance, the files of a run, the report from the MLflow store and the paper's tables. The package imports
nothing; pandas and matplotlib load with the modules that draw.

    seed_counts  how many seeds of a row completed, and what became of the others
    compare      paired differences and intervals, which rows may be ranked together
    comparisons  the table's comparisons: a verdict each (adbs_lab/stats/), where the design would stop the rest
    rereading    a finished study's recorded verdict policy, and another δ or reference asked of it
    across_tasks a comparison over the tasks it ran in (datasets, hosts): IQM, paired probability of improvement
    tables       the study's table (mean ± 95% CI per session), best_config.json
    renderings   a table in text, Markdown, LaTeX and CSV, and beside the paper's numbers
    notes        the notes above a study's tables (smoke banner, changed settings)
    figures      curves and per-session plots
    tradeoff     base against novel accuracy, one point per configuration
    pareto       the Pareto front of several objectives, pareto.json
    importance   which searched parameters matter (fANOVA over the complete trials, collapsed ones too)
    run_files    the files a run writes beside its tables (figures, trade-off, importance)
    run_pick     which run of a study a report reads
    from_store   a study's tables and figures again from the MLflow store (studies/report.py)
    paper        the paper's tables from the studies of studies/paper.py
"""

__all__ = ["seed_counts", "compare", "comparisons", "across_tasks", "tables", "renderings", "notes", "figures",
           "tradeoff", "pareto", "importance", "run_files", "run_pick", "from_store", "paper"]
