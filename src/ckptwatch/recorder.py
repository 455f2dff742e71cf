"""The import path training code uses: ``from ckptwatch.recorder import CheckpointRecorder``.

The recorder lives in :mod:`ckptwatch.collect.recorder`; this name is the same module (kept
because it runs inside training images that pin it; standard library only)."""

import sys

from ckptwatch.collect import recorder as _recorder

sys.modules[__name__] = _recorder
