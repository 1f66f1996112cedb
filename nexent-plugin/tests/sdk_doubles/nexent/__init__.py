"""TEST DOUBLE of the Nexent SDK package (``nexent``), for the memgate plugin harness only.

Only the pieces a memory provider plugin imports are reproduced, from the public Nexent code
(``sdk/nexent/memory/models.py`` and ``sdk/nexent/memory/providers/retry.py``; see
``/work/shared/reference/nexent.md`` §2-§3). Never install or ship this package.
"""
