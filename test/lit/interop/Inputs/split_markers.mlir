func.func @a() { return }
  // -----
func.func @b() { return } // -----
func.func @c() { return }
// ----- // text after the marker starts the next chunk
func.func @d() { return }
// ---- a near miss: warned about, no split
func.func @e() { return }
// ----- func.func @f() { %c = arith.constant 1 : i32 return %c : i32 }
