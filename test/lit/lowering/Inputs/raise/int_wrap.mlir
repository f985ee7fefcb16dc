// Integer arithmetic MLIR wraps (two's complement) and NEM saturates
// (D-NUM-INT) is never raised to NEM's add/sub/mul/abs (D-LOW-INT-WRAP);
// divsi, maxsi and relu as maxsi(x, 0) agree with NEM and are raised.
func.func @mul_sub(%A: memref<16xi8>, %B: memref<16xi8>, %C: memref<16xi8>) {
  affine.for %i = 0 to 16 {
    %a = "affine.load"(%A, %i) <{map = affine_map<(d0) -> (d0)>}> : (memref<16xi8>, index) -> i8
    %b = "affine.load"(%B, %i) <{map = affine_map<(d0) -> (d0)>}> : (memref<16xi8>, index) -> i8
    %p = arith.muli %a, %b : i8
    %s = arith.subi %p, %a : i8
    "affine.store"(%s, %C, %i) <{map = affine_map<(d0) -> (d0)>}> : (i8, memref<16xi8>, index) -> ()
  }
  return
}

func.func @abs(%A: memref<16xi8>, %C: memref<16xi8>) {
  affine.for %i = 0 to 16 {
    %a = "affine.load"(%A, %i) <{map = affine_map<(d0) -> (d0)>}> : (memref<16xi8>, index) -> i8
    %m = math.absi %a : i8
    "affine.store"(%m, %C, %i) <{map = affine_map<(d0) -> (d0)>}> : (i8, memref<16xi8>, index) -> ()
  }
  return
}

#id = affine_map<(d0) -> (d0)>
func.func @generic_add(%A: memref<16xi32>, %B: memref<16xi32>, %C: memref<16xi32>) {
  linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
      ins(%A, %B : memref<16xi32>, memref<16xi32>) outs(%C : memref<16xi32>) {
  ^bb0(%a: i32, %b: i32, %c: i32):
    %s = arith.addi %a, %b : i32
    linalg.yield %s : i32
  }
  return
}

func.func @div_max(%A: memref<16xi8>, %B: memref<16xi8>, %C: memref<16xi8>) {
  affine.for %i = 0 to 16 {
    %a = "affine.load"(%A, %i) <{map = affine_map<(d0) -> (d0)>}> : (memref<16xi8>, index) -> i8
    %b = "affine.load"(%B, %i) <{map = affine_map<(d0) -> (d0)>}> : (memref<16xi8>, index) -> i8
    %q = arith.divsi %a, %b : i8
    %m = arith.maxsi %q, %a : i8
    "affine.store"(%m, %C, %i) <{map = affine_map<(d0) -> (d0)>}> : (i8, memref<16xi8>, index) -> ()
  }
  return
}

func.func @window_sum(%x: memref<1x4x4x2xi32>, %s: memref<1x2x2x2xi32>) {
  affine.for %oh = 0 to 2 {
    affine.for %ow = 0 to 2 {
      affine.for %c = 0 to 2 {
        affine.for %kh = 0 to 2 {
          affine.for %kw = 0 to 2 {
            %v = "affine.load"(%x, %oh, %kh, %ow, %kw, %c) <{map = affine_map<(d0, d1, d2, d3, d4) -> (0, d0 * 2 + d1, d2 * 2 + d3, d4)>}> : (memref<1x4x4x2xi32>, index, index, index, index, index) -> i32
            %a = "affine.load"(%s, %oh, %ow, %c) <{map = affine_map<(d0, d1, d2) -> (0, d0, d1, d2)>}> : (memref<1x2x2x2xi32>, index, index, index) -> i32
            %r = arith.addi %a, %v : i32
            "affine.store"(%r, %s, %oh, %ow, %c) <{map = affine_map<(d0, d1, d2) -> (0, d0, d1, d2)>}> : (i32, memref<1x2x2x2xi32>, index, index, index) -> ()
          }
        }
      }
    }
  }
  return
}
