"""The MLIR -> NEM lowering (`convert-affine-to-nem`, `lower-to-nem`); its
architecture is described in docs/design.md ("The lowering")."""
