"""Device configurations: the shipped `.nem` device files and the catalog of
type families (data), and their resolution into the immutable device model
of `nem.dialect.device_model` (includes, inheritance, effective sets, the
Device Validity Rule for a program).  Reads `.nem` device documents through
the text front end, so it lives outside the IR package."""
