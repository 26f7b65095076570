"""Shared pytest set-up: hypothesis profiles for a shared, noisy 2-core machine.

Timing deadlines are off (speed is measured in bench/, never asserted); CI runs derandomized so a
failure reproduces from the same seed, locally examples vary from run to run.
"""

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    deadline=None,
    derandomize=True,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", deadline=None, print_blob=True, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci" if os.environ.get("CI") else "dev")
