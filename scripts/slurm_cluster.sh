#!/usr/bin/env bash
# A one-node Slurm cluster on this machine, for `make test-slurm` (tests/slurm/): the real
# slurmctld, slurmd and munged, started from a scratch folder and stopped again, no systemd.
#
#   scripts/slurm_cluster.sh start DIR   # install slurm-wlm and munge if missing (apt, root),
#                                        # write DIR/slurm.conf etc., start the daemons, wait
#                                        # until the node is idle; prints SLURM_CONF=DIR/slurm.conf
#   scripts/slurm_cluster.sh stop DIR    # cancel what still runs, stop the daemons DIR started
#
# The node is this host with its own CPUs and memory (`slurmd -C`) and two "GPUs": gres/gpu
# needs a device file per GPU (see write_config). Processes are tracked through /proc (proctrack/linuxproc): containers here have
# neither systemd nor a delegated cgroup tree. Resources are cons_tres with cores and memory
# as the consumables, so a job's --cpus-per-task and --mem are held against the node, as on a
# GPU cluster. Clients find the cluster through SLURM_CONF; munged and the Slurm daemons use a
# key and socket of DIR, so a system munge (if any) is left alone.
set -euo pipefail

usage() { echo "usage: $0 start|stop DIR" >&2; exit 2; }
[ $# -eq 2 ] || usage
action=$1
dir=$(realpath -m "$2")
ctld_port=${SLURM_TEST_CTLD_PORT:-6817}
slurmd_port=${SLURM_TEST_SLURMD_PORT:-6818}

die() { echo "slurm_cluster: $*" >&2; exit 1; }

install_packages() {
  command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null \
    && command -v sbatch >/dev/null && return 0
  [ "$(id -u)" = 0 ] || die "slurm-wlm and munge are not installed, and installing them needs root"
  echo "slurm_cluster: installing slurm-wlm and munge (apt)" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q slurm-wlm munge >/dev/null 2>&1 \
    || { apt-get update -q >/dev/null && apt-get install -y -q slurm-wlm munge >/dev/null; } \
    || die "apt-get install slurm-wlm munge failed"
}

write_config() {
  local node cpus memory
  node=$(hostname -s)
  # The machine as slurmd sees it: CPUs, sockets, cores, threads, RealMemory. A node whose
  # configuration claims more than it has is drained; less is fine.
  read -r -a hardware <<<"$(slurmd -C | head -n 1)"
  local topology=()
  for field in "${hardware[@]}"; do
    case $field in
      CPUs=*|Boards=*|SocketsPerBoard=*|CoresPerSocket=*|ThreadsPerCore=*) topology+=("$field") ;;
      RealMemory=*) memory=${field#RealMemory=} ;;
    esac
  done
  [ -n "${memory:-}" ] || die "slurmd -C named no RealMemory"
  memory=$((memory * 9 / 10))  # slurmd drains a node that reports less than it claims
  mkdir -p "$dir"/{state,spool,log,munge,dev}
  chmod 0755 "$dir/munge"  # munged: clients must reach its socket
  # Character devices (/dev/null's numbers) where the container allows it, so that Slurm also
  # sets CUDA_VISIBLE_DEVICES as on a GPU node; else empty files, which it takes with an error.
  for gpu in 0 1; do
    mknod "$dir/dev/gpu$gpu" c 1 3 2>/dev/null || : >"$dir/dev/gpu$gpu"
  done
  cat >"$dir/slurm.conf" <<EOF
# Written by scripts/slurm_cluster.sh: a one-node test cluster.
ClusterName=hp-test
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# cred_expire: a requeued job waits this long plus a second before it starts again (120 s by
# default). Never move a requeued job's start time to now instead: a start within the second
# of the requeue is refused ("Job credential revoked") and the job fails.
AuthInfo=socket=$dir/munge/munge.socket,cred_expire=10
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
PlugStackConfig=$dir/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
GresTypes=gpu
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
JobRequeue=1
ReturnToService=2
# Slurm's defaults, named because the tests and docs/launch.md rely on them: a cancelled job's
# processes get SIGTERM, then SIGKILL KillWait seconds later.
KillWait=30
MinJobAge=300
SchedulerParameters=sched_interval=2
NodeName=$node NodeAddr=127.0.0.1 ${topology[*]} RealMemory=$memory Gres=gpu:2 State=UNKNOWN
PartitionName=debug Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF
  cat >"$dir/gres.conf" <<EOF
NodeName=$node Name=gpu File=$dir/dev/gpu[0-1]
EOF
  cat >"$dir/cgroup.conf" <<EOF
# Nothing here uses cgroups (proctrack/linuxproc, task/none); slurmd reads this file anyway.
CgroupPlugin=autodetect
IgnoreSystemd=yes
ConstrainCores=no
ConstrainRAMSpace=no
ConstrainDevices=no
EOF
  : >"$dir/plugstack.conf"
}

start_munge() {
  mungekey --create --keyfile="$dir/munge/munge.key" --force 2>/dev/null \
    || dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
  chmod 0400 "$dir/munge/munge.key"
  munged --force --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.socket" \
    --pid-file="$dir/munge/munged.pid" --log-file="$dir/munge/munged.log" \
    --seed-file="$dir/munge/munged.seed" || die "munged did not start: $(tail -n 5 "$dir/munge/munged.log" 2>/dev/null)"
}

wait_for() {  # wait_for SECONDS WHAT COMMAND...: until COMMAND succeeds
  local seconds=$1 what=$2
  shift 2
  for _ in $(seq $((seconds * 2))); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.5
  done
  die "$what not reached in ${seconds}s; logs in $dir/log"
}

node_idle() { [ "$(sinfo -h -N -o %t)" = idle ]; }

start() {
  install_packages
  [ ! -e "$dir/slurmctld.pid" ] || die "$dir holds a running cluster; stop it first"
  if pgrep -x slurmctld >/dev/null || pgrep -x slurmd >/dev/null; then
    die "a slurmctld or slurmd already runs on this machine"
  fi
  rm -rf "$dir"
  write_config
  export SLURM_CONF=$dir/slurm.conf
  start_munge
  slurmctld -i || die "slurmctld did not start: $(tail -n 20 "$dir/log/slurmctld.log")"
  wait_for 30 "slurmctld answering" scontrol ping
  slurmd || die "slurmd did not start: $(tail -n 20 "$dir/log/slurmd.log")"
  wait_for 60 "the node idle" node_idle
  echo "SLURM_CONF=$dir/slurm.conf"
}

stop_pid() {  # stop_pid FILE: TERM, then KILL after 10 s, the daemon whose pid FILE holds
  local file=$1 pid
  [ -f "$file" ] || return 0
  pid=$(cat "$file")
  if kill -TERM "$pid" 2>/dev/null; then
    for _ in $(seq 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$file"
}

stop() {
  export SLURM_CONF=$dir/slurm.conf
  if [ -f "$dir/slurmctld.pid" ]; then
    scancel --full --quiet --signal=KILL --state=RUNNING --user=root 2>/dev/null || true
    scancel --quiet --user=root 2>/dev/null || true
    for _ in $(seq 30); do [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break; sleep 1; done
  fi
  stop_pid "$dir/slurmd.pid"
  stop_pid "$dir/slurmctld.pid"
  stop_pid "$dir/munge/munged.pid"
}

case $action in
  start) start ;;
  stop) stop ;;
  *) usage ;;
esac
