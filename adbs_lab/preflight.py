"""The study's preflight lives in adbs_lab/driver/preflight.py; this name stays for code that imports it here."""

from adbs_lab.driver.preflight import *  # noqa: F401,F403 - its public names
from adbs_lab.driver.preflight import __all__  # noqa: F401
