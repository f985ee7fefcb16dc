// affine.max (which xDSL lacks) parses in upstream syntax, round-trips, lowers
// and runs in the reference runtime's escape-hatch interpreter.
// RUN: nem-opt %s | filecheck %s --check-prefix=RT
// RUN: nem-opt %s -p 'lower-to-nem{remarks=true}' -t nem 2>&1 | filecheck %s --check-prefix=LOW
// RUN: nem-opt %s -p lower-to-nem -t nem -o %t.nem
// RUN: nem-run %t.nem --random-inputs 3 | filecheck %s --check-prefix=EXEC
// RT: %lo = affine.max affine_map<(d0) -> (d0, 0)> (%i)
// RT: %k = affine.max affine_map<(d0) -> (d0, 4)> (%j)
// LOW: remark: lowered @f to NEM
// LOW: op="mlir.kernel"
// EXEC: status: completed
// EXEC: races: 0
func.func @f(%a: memref<64xf32>, %b: memref<64xf32>) {
  affine.for %i = 0 to 64 step 16 {
    %lo = affine.max affine_map<(d0) -> (d0, 0)>(%i)
    affine.for %j = 0 to 16 {
      %k = affine.max affine_map<(d0) -> (d0, 4)>(%j)
      %v = affine.load %a[%i + %k] : memref<64xf32>
      affine.store %v, %b[%i + %j] : memref<64xf32>
    }
  }
  return
}
