// nem-inline-async-executes (D-LOW-ASYNC-INLINE) makes the checks the
// conversion made of the async ops it lowered, with the same text at the
// same op (lower-to-nem reports them the same: async_value.mlir).
// RUN: nem-opt %s --split-input-file --verify-diagnostics -p nem-inline-async-executes

func.func @scalar_used(%X: memref<64xf32>) {
  // expected-error@+1 {{cannot lower 'async.execute': not supported: result #1 of type !async.value<f32> is used; a scalar !async.value has no NEM equivalent (NEM tasks exchange data only through buffers)}}
  %t, %v = async.execute -> !async.value<f32> {
    %c = arith.constant 2.0 : f32
    async.yield %c : f32
  }
  %s = async.await %v : !async.value<f32>
  return
}

// -----

// in a NEM loop (it moves data), used by another execute's body
func.func @scalar_operand(%X: memref<64xf32>, %Y: memref<64xf32>) {
  affine.for %i = 0 to 4 {
    memref.copy %X, %Y : memref<64xf32> to memref<64xf32>
    // expected-error@+1 {{cannot lower 'async.execute': not supported: result #2 of type !async.value<i32> is used}}
    %t, %m, %v = async.execute -> (!async.value<memref<64xf32>>, !async.value<i32>) {
      %c = arith.constant 2 : i32
      async.yield %X, %c : memref<64xf32>, i32
    }
    %t2 = async.execute (%v as %s: !async.value<i32>) {
      async.yield
    }
  }
  return
}

// -----

// a token argument: the conversion rejects the function first, so the pass
// leaves its users as they are
// RUN: not nem-opt %s --split-input-file -p nem-inline-async-executes 2>/dev/null | filecheck %s --check-prefix=ARG
// ARG-LABEL: func.func @token_argument(
// ARG-NEXT: %t2 = async.execute [%t] {
// ARG: async.await %t2 : !async.token
// RUN: not nem-opt %s --split-input-file -p 'lower-to-nem{device=npm_pro_x1}' 2>&1 | filecheck %s --check-prefix=ARGLOWER
// ARGLOWER: error: cannot lower 'func.func': argument #1 of type !async.token is not a memref
func.func @token_argument(%X: memref<64xf32>, %t: !async.token) {
  %t2 = async.execute [%t] {
    async.yield
  }
  async.await %t2 : !async.token
  return
}
