# Shell functions shared by the benchmark scripts (scripts/bench.sh, scripts/bench_mamba2.sh).
# Source it; the caller sets `work` (its work directory) before calling wait_idle or measured, and
# may set `bench_name` (the prefix of log lines; default "bench").
# shellcheck shell=bash

log() { echo "${bench_name:-bench}: $*" >&2; }

# Busy and total jiffies of the whole machine (from /proc/stat), to tell how much of the machine
# other processes used during a measurement.
cpu_jiffies() {
  local _c u n s i w x y z _r
  read -r _c u n s i w x y z _r </proc/stat
  echo "$((u + n + s + x + y + z)) $((u + n + s + i + w + x + y + z))"
}

# Waits (at most BENCH_IDLE_WAIT seconds, default 300) until the machine is nearly idle (< 10 % busy
# over 3 s): other engineers may be compiling. Appends what it saw to $work/load_log.txt.
# Usage: wait_idle LABEL
wait_idle() {
  local waited=0 limit=${BENCH_IDLE_WAIT:-300} a1 a2 b1 b2 busy
  while :; do
    read -r a1 a2 < <(cpu_jiffies); sleep 3; read -r b1 b2 < <(cpu_jiffies)
    busy=$(( (b1 - a1) * 100 / (b2 - a2 > 0 ? b2 - a2 : 1) ))
    if [ "$busy" -lt 10 ] || [ "$waited" -ge "$limit" ]; then break; fi
    waited=$((waited + 3))
  done
  echo "$1: machine ${busy}% busy before (waited ${waited}s); $(uptime | sed 's/.*load/load/')" >>"$work/load_log.txt"
}

# Runs a command under GNU time -v, appending to $work/other_load.txt the line
#   LABEL busy_jiffies_before busy_jiffies_after t0 t1 CLK_TCK
# from which the share of the machine (in cores) used by other processes meanwhile follows:
# (busy jiffies of the machine - the command's own CPU time) / elapsed.
# Usage: measured LABEL TIMEFILE cmd...   (TIMEFILE: GNU time -v output of the command)
measured() {
  local label=$1 tf=$2; shift 2
  local a1 a2 b1 b2 t0 t1
  read -r a1 a2 < <(cpu_jiffies); t0=$(date +%s.%N)
  /usr/bin/time -v -o "$tf" "$@"
  read -r b1 b2 < <(cpu_jiffies); t1=$(date +%s.%N)
  echo "$label $a1 $b1 $t0 $t1 $(getconf CLK_TCK)" >>"$work/other_load.txt"
}

# GNU time (for the peak RSS), installed as scripts/setup.sh installs packages.
ensure_gnu_time() {
  if [ ! -x /usr/bin/time ]; then
    log "installing GNU time"
    local sudo_cmd=()
    [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
    "${sudo_cmd[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends time >/dev/null
  fi
}

# The common start of a one-thread benchmark against a Python peer (bench_cocycle, bench_green,
# bench_continuation): sets bench_name, py (Debian's /usr/bin/python3) and work (a temporary folder,
# removed on exit), checks that py has the modules and that $build/tokdyn exists, and pins OpenBLAS
# and OpenMP to one thread. The caller sets `build` first.
# Usage: bench_start NAME "numpy scipy"
bench_start() {
  bench_name=$1
  py=/usr/bin/python3
  export BENCH_IDLE_WAIT=${BENCH_IDLE_WAIT:-60}
  work=$(mktemp -d "/tmp/tokdyn-$1.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  "$py" -c "import ${2// /, }" 2>/dev/null || { echo "$1: $py has no $2: run scripts/setup.sh" >&2; exit 1; }
  [ -x "$build/tokdyn" ] || { echo "$1: $build/tokdyn missing: build it first" >&2; exit 1; }
  export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
}
