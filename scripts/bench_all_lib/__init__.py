"""The pieces of scripts/bench_all.py, one benchmark run of every tokdyn workload against its peer:

  config              the workloads, their sizes per mode, the issue's baselines
  measure             the measurement machinery (idle waits, GNU time, environments), result rows,
                      the GEMM peaks, the machine's description, time formatting
  flops               the flop counts of the per-workload scripts
  agreement           the bounds within which tokdyn and each peer must agree, derived from the
                      tolerances of the two methods compared
  workloads_models    mamba2-fig1, ssm-random-silu, depth-spectra, gpt2-depth, sweep
  workloads_numerics  cocycle-spectra, rope-table2, green, continuation
  report              bench/results*.md and README.md's generated Speed table
"""
