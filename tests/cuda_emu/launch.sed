# tests/cuda_emu/launch.sed — rewrites a .cu file of kernels/cuda for the host emulation
# (sz_cuda_emu.h): k<<<cfg>>>(args) becomes sz_emu_launch("k", k, cfg)(args); `extern __shared__
# T name[];` the launch's dynamic shared memory; `__shared__ T name[...];` a function-static array
# refilled with garbage for each block. Everything else is compiled as written.
s/\([A-Za-z_][A-Za-z0-9_]*\(<[^<>]*>\)\{0,1\}\)<<<\(.*\)>>>(/sz_emu_launch("\1", \1, \3)(/
s/extern __shared__ \(__align__([0-9]*) \)\{0,1\}\([A-Za-z_][A-Za-z0-9_]*\) \([A-Za-z_][A-Za-z0-9_]*\)\[\];/\2 *\3 = (\2 *)sz_emu_dyn_smem();/
s/__shared__ \([A-Za-z_][A-Za-z0-9_]*\) \([A-Za-z_][A-Za-z0-9_]*\)\(\[[^;]*\]\);/static \1 \2\3; sz_emu_shared(\2, sizeof \2);/
