"""NEM toolchain: the NeuPro-M Execution Model on xDSL."""
