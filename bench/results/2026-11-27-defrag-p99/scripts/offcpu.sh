#!/usr/bin/env bash
# offcpu.sh PID OUT SECONDS: sched_switch stacks of the node's threads
pid=$1; out=$2; secs=${3:-10}
perf record -e sched:sched_switch -g -p $pid -o $out.data -- sleep $secs >/dev/null 2>&1
perf script -i $out.data -F comm,tid,event,trace,ip,sym 2>/dev/null > $out.txt
