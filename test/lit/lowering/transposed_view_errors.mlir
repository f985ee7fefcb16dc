// memref.reinterpret_cast: only static views of a whole buffer that stay in
// it (D-LOW-VIEW); anything else is a located diagnostic.
// RUN: nem-opt %s --split-input-file --verify-diagnostics -p 'lower-to-nem{device=npm_pro_x1}'

func.func @past_the_end(%x: memref<24xf32>, %z: memref<2x12xf32>) {
  // expected-error@+1 {{memref.reinterpret_cast reaches element 24 of a 24-element memref}}
  %v = memref.reinterpret_cast %x to offset: [1], sizes: [2, 12], strides: [12, 1]
      : memref<24xf32> to memref<2x12xf32, strided<[12, 1], offset: 1>>
  memref.copy %v, %z : memref<2x12xf32, strided<[12, 1], offset: 1>> to memref<2x12xf32>
  return
}

// -----

func.func @of_a_view(%x: memref<4x6xf32>, %z: memref<6xf32>) {
  %s = memref.subview %x[1, 0] [2, 6] [1, 1] : memref<4x6xf32> to memref<2x6xf32, strided<[6, 1], offset: 6>>
  // expected-error@+1 {{not supported: a memref.reinterpret_cast of a view (D-LOW-VIEW)}}
  %v = memref.reinterpret_cast %s to offset: [0], sizes: [6], strides: [1]
      : memref<2x6xf32, strided<[6, 1], offset: 6>> to memref<6xf32, strided<[1]>>
  memref.copy %v, %z : memref<6xf32, strided<[1]>> to memref<6xf32>
  return
}

// -----

func.func @dynamic(%x: memref<24xf32>, %z: memref<24xf32>) {
  %o = arith.constant 0 : index
  // expected-error@+1 {{not supported: a memref.reinterpret_cast that is not static (D-LOW-VIEW)}}
  %v = memref.reinterpret_cast %x to offset: [%o], sizes: [24], strides: [1]
      : memref<24xf32> to memref<24xf32, strided<[1], offset: ?>>
  memref.copy %v, %z : memref<24xf32, strided<[1], offset: ?>> to memref<24xf32>
  return
}

// -----

func.func @with_an_offset(%x: memref<24xf32>, %z: memref<2x11xf32>) {
  // expected-error@+1 {{not supported: a memref.reinterpret_cast with an offset}}
  %v = memref.reinterpret_cast %x to offset: [1], sizes: [2, 11], strides: [11, 1]
      : memref<24xf32> to memref<2x11xf32, strided<[11, 1], offset: 1>>
  memref.copy %v, %z : memref<2x11xf32, strided<[11, 1], offset: 1>> to memref<2x11xf32>
  return
}
