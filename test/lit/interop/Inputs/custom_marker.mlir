func.func @a() { return }
XYZ
func.func @g() { return }
