"""The NEM execution model, written once, a module per topic.

Everything a NEM program *means* when it runs is stated here as code, and the
static checker (`nem.dialect.verifier`, `nem.analysis.happens_before`,
`nem.analysis.capacity`, the device and placement passes), the reference
runtime (`nem.runtime`: scheduler, engine, kernels, memory, checks, API) and
the lowering import it.  When two of them disagree, one of them holds a
second copy of a fact in this package: remove the copy (docs/design.md,
"Execution model"; decisions D-SEM-* in docs/spec-decisions.md).

* **Element types** (`nem.dialect.elements.ELEM_TYPES`, a module of its own:
  the IR's attributes read it): spec name, bit width, float/signed, the
  xDSL type, the MLIR spelling and the numpy / ml_dtypes dtype.
* **What a transfer moves** (`transfers`: `moved_bytes`, `moved_count`, `fills_range`): a typed region
  its elements, an untyped one its byte range (D-SEM-TRANSFER).
* **Integer expressions** have their own module, `nem.dialect.expressions`
  (`apply_binop`, `Evaluator`): `/` truncates toward zero, `mod` is the
  truncated remainder (D-EXPR-MOD).
* **Streams, loops and ends** (`streams`: `LOOP_END`, `PROGRAM_END`, `ITERATION_END`):
  the program body and each loop iteration are instruction streams; a
  `wait`/`.sync` blocks its own stream; `endloop` waits for every iteration
  to be *issued and past its waits* but not for its tasks to complete
  (D-SEM-ENDLOOP); the program's end waits for every task (D-SEM-PROGRAM-END);
  an iteration ends when its stream ended and all it issued completed.
* **The `@max_in_flight(N)` window** (`LoopOp.max_in_flight`, `LoopOp.window_error`;
  `streams`: `window_orders`, `complete_at_loop_end`): iteration `j` opens once every
  iteration `<= j - N` has completed (LOOP-01/02/05/06, D-HAZ-PIPE).
* **Instances of loop-body declarations** (`instances`: `loop_copies`, `instance_index`):
  a buffer declared in a loop body has one instance per iteration that can be
  in flight (D-SEM-INSTANCES).
* **Which units may run a task** (`units`: `eligible_units`, `bind_unit`), on a given
  device (D-SEM-UNITS, RES-03/04/05/07).
* **What a task costs in timed mode** (`cost`: `task_work`, `DEFAULT_PROFILE`,
  `macs_per_cycle`): its amount of work, its unit's rate and latency; the runtime's
  durations and roofline bounds and the token fit's estimate of when tasks end
  (D-RT-COST, D-DEPS-SYNTH).
* **Memory layout of a level** (`layout`: `layout`): the placement the capacity check
  verifies is the one the runtime uses (D-SEM-LAYOUT, DEV-16).
* **When `clamp` is the IR's min of max** (`clamp`: `clamp_matches_min_max`): the
  lowering's raise and the compiler's L1 plan ask it (D-LOW-CLAMP).
"""
