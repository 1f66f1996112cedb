"""TEST DOUBLE of the Nexent SDK package (``nexent``), for the memgate plugin harness only.

Reproduces the pieces a memory provider plugin and Nexent's external-provider service use, read
from the real code: ModelEngine-Group/nexent branch ``dev/feature/xyc/memory_0722`` (commit
d17fc254a74df947ea51ec5e7fccd0099af8ffd6), ``sdk/nexent/memory/models.py``,
``sdk/nexent/memory/providers/retry.py`` (identical at 531d67008681dd8272915264408fbe902428bc4a),
``sdk/nexent/memory/providers/base.py`` and the two ``__init__.py`` files. No ``nexent`` release on
PyPI holds this code yet, so the real package cannot be installed. Never install or ship this one.
"""
