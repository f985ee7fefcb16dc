builtin.module {
  "nem.program"() <{sym_name = "p", device_kind = "inline", device = "device tiny extends nem_baseline_1_0 {\0A    topology {\0A        num_engines = 0\0A        l2_size_bytes = 1024\0A        per_engine {\0A            NMU = 1\0A            l1_size_bytes = 1024\0A        }\0A    }\0A}\0A", includes = ["nem_baseline_1.0.nem"]}> ({
    %0 = arith.constant 64 : index
    %A = "nem.buffer"(%0) <{name = "A"}> : (index) -> !nem.buffer<#nem.level<L2>>
  }) : () -> ()
}

