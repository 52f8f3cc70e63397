"""Benchmarks of real nodes over loopback TCP: ``python -m
testnet.bench.forwarding`` (one node's forwarding rate against a plain trio forwarder) and
``python -m testnet.bench.latency`` (publish-to-delivery latency on a 20-node network). Each
runs its baseline in the same invocation and reports a ratio or a side-by-side figure, because
the machine is shared and absolute numbers move from one minute to the next."""
