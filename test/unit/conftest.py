"""Shared pytest configuration of test/unit.

Helper modules of this folder (`nem_programs`, `program_generator`,
`lowering_runs`, `mlir_tools`, `async_sources` and its `async_params`,
`async_text`, `async_pipelines`,
...) are imported by name: pytest puts this folder on sys.path.  Test modules
import helpers from those modules, never from other test modules.

Hypothesis profiles, chosen by the HYPOTHESIS_PROFILE environment variable:

- `ci` (what .ci/run sets): derandomized, so a CI run is reproducible and a
  failure is the same on every rerun; no example database.
- `dev` (the default): random examples.
- `long`: random, 1000 examples and no deadline for the property tests that
  do not fix their own `max_examples` (a test's `@settings` wins over the
  profile), e.g. `HYPOTHESIS_PROFILE=long python -m pytest -q
  test/unit/test_hazards_property.py`.
"""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
settings.register_profile("dev")
settings.register_profile("long", max_examples=1000, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))
