"""NEM passes (installed as `nem.passes`)."""

from nem.passes.verify import PASSES

__all__ = ["PASSES"]
