#!/usr/bin/env bash
# Two builds of the peer driver against each other, with the ledger on and
# off, on a machine whose speed drifts: the runs alternate (build A on, A
# off, B on, B off, five rounds), and each line is the minimum over the
# rounds of a process's median.
#
#   benches/peers/ab.sh OLD_DRIVER NEW_DRIVER compact FILE 8000 4000 heuristic 300
#   benches/peers/ab.sh OLD_DRIVER NEW_DRIVER rolling FILE 10000 4000
#
# A driver is a copy of target/release/examples/peer_driver built at each
# commit; FILE comes from `peer_driver gen MESSAGES 42 FILE`.
set -euo pipefail
a=$1 b=$2
shift 2
for _ in 1 2 3 4 5; do
  for bin in "$a" "$b"; do
    for ledger in on off; do
      if [ "$ledger" = off ]; then export CHATFOLD_NO_LEDGER=1; else unset CHATFOLD_NO_LEDGER; fi
      "$bin" "$@" 2>/dev/null | python3 -c "
import json, statistics, sys
d = json.load(sys.stdin)
t = statistics.median(d['times_s']) if 'times_s' in d else d['total_s']
print('$bin', '$ledger', t * 1e6)"
    done
  done
done | python3 -c "
import collections, sys
runs = collections.defaultdict(list)
for line in sys.stdin:
    bin, ledger, t = line.split()
    runs[(bin, ledger)].append(float(t))
for bin in dict.fromkeys(k[0] for k in runs):
    on, off = min(runs[(bin, 'on')]), min(runs[(bin, 'off')])
    print(f'{bin}: ledger on {on:.1f} us, off {off:.1f} us, {on / off:.3f}x')
"
