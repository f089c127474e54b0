"""The tests, a package so that a test module imports its helpers by one name from any folder (tests/helpers/),
however pytest was started (the whole suite, one file, -k): pytest puts the repository root, the folder above the
top __init__.py, on sys.path."""
