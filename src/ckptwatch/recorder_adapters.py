"""The import path training code uses: ``from ckptwatch.recorder_adapters import …`` and
``python -m ckptwatch.recorder_adapters megatron LOG …``.

The adapters live in :mod:`ckptwatch.collect.adapters`; this name is the same module."""

import sys

from ckptwatch.collect import adapters as _adapters

if __name__ == "__main__":
    sys.exit(_adapters.main())
sys.modules[__name__] = _adapters
