// The `memory-spaces` option of lower-to-nem (D-LOW-OPT-SPACES): MLIR's unquoted
// spelling `memory-spaces=0:DDR,1:L2` in any option position, the quoted form
// and the `0-DDR,1-L2` form all map memref memory spaces to NEM levels.  Here
// space 1 is mapped to L1 and space 2 to L2 (the reverse of the default).
// RUN: nem-opt %s -p 'lower-to-nem{memory-spaces=0:DDR,1:L1,2:L2 device=npm_pro_x1}' -t nem 2>/dev/null | filecheck %s
// RUN: nem-opt %s -p 'lower-to-nem{device=npm_pro_x1 memory-spaces=0:DDR,1:L1,2:L2}' -t nem 2>/dev/null | filecheck %s
// RUN: nem-opt %s -p 'lower-to-nem{device=npm_pro_x1 memory-spaces=0:DDR,1:L1,2:L2 entry=spaces}' -t nem 2>/dev/null | filecheck %s
// RUN: nem-opt %s -p 'lower-to-nem{device=npm_pro_x1 memory-spaces="0:DDR,1:L1,2:L2"}' -t nem 2>/dev/null | filecheck %s
// RUN: nem-opt %s -p 'lower-to-nem{device=npm_pro_x1 memory-spaces=0-DDR,1-L1,2-L2}' -t nem 2>/dev/null | filecheck %s
// CHECK: buffer X : DDR (size=1024, align=64)
// CHECK: buffer s1 : L1[0] (size=1024, align=64)
// CHECK: buffer s2 : L2 (size=1024, align=64)
// CHECK: transfer.async(dst=region(s1, 0, 1024) {{.*}} src=region(X, 0, 1024)
// CHECK: transfer.async(dst=region(s2, 0, 1024) {{.*}} src=region(s1, 0, 1024)
//
// An engine-qualified level needs no quotes either (xDSL's lexer has no `[`):
// RUN: nem-opt %s -p 'lower-to-nem{memory-spaces=0:DDR,1:L1[0],2:L2 device=npm_pro_x1}' -t nem 2>/dev/null | filecheck %s --check-prefix=ENGINE
// ENGINE: buffer s1 : L1[0] (size=1024, align=64)
// ENGINE: buffer s2 : L2 (size=1024, align=64)
//
// The default is 0:DDR,1:L2,2:L1.  An `L1` without an engine index is
// written `L1[0]` when the device has several engines (D-LOW-L1, D-DEV-L1),
// so the lowered program verifies with no BUF-05 warning (NOWARN); on a
// one-engine device, and with no device, it stays `L1`:
// RUN: nem-opt %s -p 'lower-to-nem{device=npm_pro_x1}' -t nem 2>/dev/null | filecheck %s --check-prefix=DEFAULT
// DEFAULT: buffer s1 : L2 (size=1024, align=64)
// DEFAULT: buffer s2 : L1[0] (size=1024, align=64)
// RUN: nem-opt %s -p 'lower-to-nem{device=npm_pro_x1},nem-verify{device=npm_pro_x1}' -o /dev/null 2>&1 | filecheck %s --allow-empty --check-prefix=NOWARN
// NOWARN-NOT: {{.}}
// RUN: nem-opt %s -p 'lower-to-nem{device=npm_lite}' -t nem 2>/dev/null | filecheck %s --check-prefix=ONE-ENGINE
// RUN: nem-opt %s -p 'lower-to-nem' -t nem 2>/dev/null | filecheck %s --check-prefix=ONE-ENGINE
// ONE-ENGINE: buffer s2 : L1 (size=1024, align=64)
//
// A bad value is one line naming the pass, the option and the item, never a
// traceback, before any input is read (quoted or not); nothing
// follows it (ONE-NOT):
// RUN: not nem-opt %s -p 'lower-to-nem{memory-spaces=0:DDR,1:FOO device=npm_pro_x1}' -t nem 2>&1 | filecheck %s --check-prefixes=ONE,LEVEL
// RUN: not nem-opt %s -p 'lower-to-nem{memory-spaces="0:DDR,1:FOO"}' -t nem 2>&1 | filecheck %s --check-prefixes=ONE,LEVEL
// LEVEL: {{^}}nem-opt: error: lower-to-nem: bad memory-spaces item '1:FOO': 'FOO' is not a memory level (DDR, L2, L1 or L1[k]){{$}}
// RUN: not nem-opt %s -p 'lower-to-nem{memory-spaces=x:DDR}' -t nem 2>&1 | filecheck %s --check-prefixes=ONE,SPACE
// SPACE: {{^}}nem-opt: error: lower-to-nem: bad memory-spaces item 'x:DDR': memory space 'x' is not a non-negative integer{{$}}
// RUN: not nem-opt %s -p 'lower-to-nem{memory-spaces=0:DDR,1:L2,1:L1}' -t nem 2>&1 | filecheck %s --check-prefixes=ONE,DUP
// RUN: not nem-opt %s -p 'lower-to-nem{memory-spaces=0-DDR,1-L2,1-L1}' -t nem 2>&1 | filecheck %s --check-prefixes=ONE,DUP-DASH
// DUP: {{^}}nem-opt: error: lower-to-nem: bad memory-spaces item '1:L1': memory space 1 is already mapped to L2{{$}}
// DUP-DASH: {{^}}nem-opt: error: lower-to-nem: bad memory-spaces item '1-L1': memory space 1 is already mapped to L2{{$}}
// RUN: not nem-opt %s -p 'lower-to-nem{memory-spaces=1:L1[x]}' -t nem 2>&1 | filecheck %s --check-prefixes=ONE,ENGINE-BAD
// ENGINE-BAD: {{^}}nem-opt: error: lower-to-nem: bad memory-spaces item '1:L1[x]': 'L1[x]' is not a memory level: only L1 takes an engine index, L1[k] with k >= 0{{$}}
// RUN: not nem-opt %s -p 'lower-to-nem{memory-spaces= device=npm_pro_x1}' -t nem 2>&1 | filecheck %s --check-prefixes=ONE,EMPTY
// EMPTY: {{^}}nem-opt: error: lower-to-nem: bad memory-spaces value: empty (write memory-spaces=0:DDR,1:L2,2:L1){{$}}
// ONE-NOT: {{.}}
//
// A space the map leaves out is reported at the memref that uses it:
// RUN: not nem-opt %s -p 'lower-to-nem{memory-spaces=0:DDR,1:L2}' -t nem 2>&1 | filecheck %s --check-prefix=UNMAPPED
// UNMAPPED: memory_spaces.mlir:[[# @LINE + 7]]:3: error: cannot lower 'memref.alloc': memory space 2 is not mapped to a NEM level
// UNMAPPED: fix: add 2:LEVEL to the memory-spaces option

func.func @spaces(%X: memref<256xf32>, %Z: memref<256xf32>) {
  %c0 = arith.constant 0 : index
  %n = arith.constant 256 : index
  %s1 = memref.alloc() : memref<256xf32, 1>
  %s2 = memref.alloc() : memref<256xf32, 2>
  %tag = memref.alloc() : memref<3xi32>
  affine.dma_start %X[%c0], %s1[%c0], %tag[0], %n : memref<256xf32>, memref<256xf32, 1>, memref<3xi32>
  affine.dma_wait %tag[0], %n : memref<3xi32>
  affine.dma_start %s1[%c0], %s2[%c0], %tag[1], %n : memref<256xf32, 1>, memref<256xf32, 2>, memref<3xi32>
  affine.dma_wait %tag[1], %n : memref<3xi32>
  affine.dma_start %s2[%c0], %Z[%c0], %tag[2], %n : memref<256xf32, 2>, memref<256xf32>, memref<3xi32>
  affine.dma_wait %tag[2], %n : memref<3xi32>
  return
}
