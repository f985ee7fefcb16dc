# a .nem program
device "npm_lite.nem"
const T = 4
