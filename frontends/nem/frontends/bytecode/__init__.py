"""NEM bytecode (`.nemb`): a versioned binary container for NEM programs
(docs/bytecode.md).  `write_nemb` turns IR into bytes, `read_nemb` bytes into
IR; `load_nemb` also applies the static rules, as parsing `.nem` text does."""
