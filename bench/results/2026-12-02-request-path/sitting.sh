#!/bin/bash
# Workload A, node CPU per operation: the node before issue 33 (106ec93) and after (this stop),
# alternating, three rounds, both settings.
cd /work/wt-lead
mkdir -p target/release && cp /tmp/bin-after/hayate-bench target/release/hayate-bench && cp /tmp/bin-after/hayate target/release/hayate
export HAYATE_ADDRESS=127.0.0.9
for round in 1 2 3; do
  for setting in defaults ram; do
    for build in before after; do
      args=()
      [ "$setting" = ram ] && args=('post_write_cache = "1GiB"')
      line=$(HAYATE_NODE_BIN=/tmp/bin-$build/hayate bench/cpu-per-op.sh 200000 3000000 "${args[@]}" 2>&1 | tail -1)
      echo "round $round | $build | $line"
    done
  done
done
