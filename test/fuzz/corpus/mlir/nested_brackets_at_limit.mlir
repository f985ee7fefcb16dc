func.func @f(%A: memref<64xf32>) {
affine.for %i0 = 0 to 1 {
affine.for %i1 = 0 to 1 {
affine.for %i2 = 0 to 1 {
affine.for %i3 = 0 to 1 {
affine.for %i4 = 0 to 1 {
affine.for %i5 = 0 to 1 {
affine.for %i6 = 0 to 1 {
affine.for %i7 = 0 to 1 {
affine.for %i8 = 0 to 1 {
affine.for %i9 = 0 to 1 {
affine.for %i10 = 0 to 1 {
affine.for %i11 = 0 to 1 {
affine.for %i12 = 0 to 1 {
affine.for %i13 = 0 to 1 {
affine.for %i14 = 0 to 1 {
affine.for %i15 = 0 to 1 {
affine.for %i16 = 0 to 1 {
affine.for %i17 = 0 to 1 {
affine.for %i18 = 0 to 1 {
affine.for %i19 = 0 to 1 {
affine.for %i20 = 0 to 1 {
affine.for %i21 = 0 to 1 {
affine.for %i22 = 0 to 1 {
affine.for %i23 = 0 to 1 {
affine.for %i24 = 0 to 1 {
affine.for %i25 = 0 to 1 {
affine.for %i26 = 0 to 1 {
affine.for %i27 = 0 to 1 {
affine.for %i28 = 0 to 1 {
affine.for %i29 = 0 to 1 {
affine.for %i30 = 0 to 1 {
affine.for %i31 = 0 to 1 {
affine.for %i32 = 0 to 1 {
affine.for %i33 = 0 to 1 {
affine.for %i34 = 0 to 1 {
affine.for %i35 = 0 to 1 {
affine.for %i36 = 0 to 1 {
affine.for %i37 = 0 to 1 {
affine.for %i38 = 0 to 1 {
affine.for %i39 = 0 to 1 {
affine.for %i40 = 0 to 1 {
affine.for %i41 = 0 to 1 {
affine.for %i42 = 0 to 1 {
affine.for %i43 = 0 to 1 {
affine.for %i44 = 0 to 1 {
affine.for %i45 = 0 to 1 {
affine.for %i46 = 0 to 1 {
affine.for %i47 = 0 to 1 {
affine.for %i48 = 0 to 1 {
affine.for %i49 = 0 to 1 {
affine.for %i50 = 0 to 1 {
affine.for %i51 = 0 to 1 {
affine.for %i52 = 0 to 1 {
affine.for %i53 = 0 to 1 {
affine.for %i54 = 0 to 1 {
affine.for %i55 = 0 to 1 {
affine.for %i56 = 0 to 1 {
affine.for %i57 = 0 to 1 {
affine.for %i58 = 0 to 1 {
affine.for %i59 = 0 to 1 {
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
}
return
}
