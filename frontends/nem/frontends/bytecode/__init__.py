"""NEM bytecode (`.nemb`): a versioned binary container for NEM programs
(docs/bytecode.md).  `write_nemb` turns IR into bytes, `read_nemb` bytes into
IR; `load_nemb` also applies the static rules, as parsing `.nem` text does."""

MAGIC = b"NEMB"
"""The first four bytes of a `.nemb` file.  Here, not in `container`, so that
a tool can tell a `.nemb` input without loading the reader (flatbuffers loads
numpy: a quarter of `nem-opt`'s start-up)."""
