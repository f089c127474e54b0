"""What several test modules share, imported as `from tests.helpers.scripts import in_process`. A test module imports
no other test module: what two of them need lives here (tests/repo/test_architecture.py checks); the servers that
bench/ starts too are in testing/.

    scripts       a command line of this repository run in the test's own process (in_process)
    datasets      fake datasets on disk: the community layouts, and a CIFAR-100 copy of the embedded benchmark
    fakes         hand-made objects: a base session to cache, a small study's trials table
    studies       a running study's first finished trial, and its MLflow runs as the study tests check them
    browser       headless Chromium through Playwright for the UI tests (open_browser)
    smoke_store   one ablation smoke study into a temporary MLflow store, shared by the report and browser tests
    values        generated config values of every kind a search space may hold, and their comparison
"""
