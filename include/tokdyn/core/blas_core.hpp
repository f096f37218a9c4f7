#pragma once
// Process setup at the top of main: which OpenBLAS kernels run (and the fix for a CPU newer than
// the library), and how freed memory is kept.
//
// OpenBLAS (Debian's is built with DYNAMIC_ARCH) picks its kernel set when it is loaded, from the
// CPU's model number. A model it does not know gets the generic "Prescott" kernels (SSE3, no
// AVX): Debian 12's OpenBLAS 0.3.21 does this to Intel's Emerald Rapids Xeons (family 6, model
// 207), where DGEMM then runs 6.9x below the hardware. OpenBLAS reads OPENBLAS_CORETYPE when it is
// loaded, so a program can only fix this by setting it and starting again: ensure_blas_core does
// that at the top of main (tokdyn, its tests and benchmarks); the Python package sets the
// variable before its module loads OpenBLAS (python/tokdyn/__init__.py asks `tokdyn machine`).
#include <string>

namespace tokdyn {

/// The kernel set OpenBLAS uses in this process (openblas_get_corename), e.g. "Haswell", "SkylakeX".
std::string blas_core();

/// The kernel set to ask OpenBLAS for when its own choice has no AVX2 kernels on a CPU that has
/// AVX2 and FMA: "SkylakeX" where AVX-512 (F, CD, BW, DQ, VL) is available, else "Haswell"; empty
/// when OpenBLAS's choice is already right (or the CPU is not x86-64).
std::string blas_core_upgrade();

/// Call first in main. When OPENBLAS_CORETYPE is not set and blas_core_upgrade() names a kernel
/// set, sets OPENBLAS_CORETYPE to it and TOKDYN_BLAS_CORE_DETECTED to OpenBLAS's own choice, and
/// re-executes the program with the same arguments (OpenBLAS reads the variable when it is
/// loaded). A user's OPENBLAS_CORETYPE, or TOKDYN_BLAS_CORE=keep, is left alone; any other value
/// of TOKDYN_BLAS_CORE is refused (one line on stderr, exit 2). If the
/// re-execution fails, the program goes on with the kernels it has.
void ensure_blas_core(char** argv);

/// The kernel set OpenBLAS chose by itself when ensure_blas_core replaced it (empty otherwise).
std::string blas_core_detected();

/// Call early in main (tokdyn, its tests and benchmarks; not in the Python module, whose process
/// is the user's). glibc gives freed blocks at the top of its heap back to the kernel once more
/// than a threshold is free (at most 64 MiB with its adaptive default), so a layer loop that
/// allocates and frees tens of MiB per layer (SsmLayer::apply: Delta, A, the readout, 2500 x 768
/// doubles each) took fresh zeroed pages from the kernel at every layer: 10 % of ssm-random-silu's
/// time was page faults (perf). This keeps up to 512 MiB of freed heap for reuse and serves blocks
/// up to 32 MiB (glibc's largest mmap threshold) from the heap. Peak memory grows a little
/// (ssm-random-silu at depth 40: 137 -> 151 MiB): the kept pages are the ones the next layer asks
/// for. No effect on other C libraries.
void keep_freed_memory();

}  // namespace tokdyn
