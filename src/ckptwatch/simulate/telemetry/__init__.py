"""Telemetry of a simulated scenario: pool metrics, NVMe SMART (smartctl + OCP), fabric counters.

The scenario (``ckptwatch.simulate.scenario``) decides the cluster, the rank writes and the
incidents; the modules of this package turn them into the signals real collectors record, in
their raw formats:

- ``telemetry.pool``: long CSV ``ts,pool,target,metric,value`` (gauges averaged over the sample
  interval, ``write_bytes`` cumulative);
- ``telemetry.smart``: JSON Lines envelopes per host with ``smartctl -j -a`` documents and
  nvme-cli ``ocp smart-add-log -o json`` documents (cumulative counters, 1 data unit = 512,000
  bytes, OCP physical media units in bytes);
- ``telemetry.fabric``: JSON Lines envelopes per node with raw ``ethtool -S`` (RoCE) or
  ``perfquery -x`` (InfiniBand) text, or the canonical long CSV
  ``ts,node,device,port,counter,value``;
- ``telemetry.sampling``: what the three share (sample clocks, timestamps, the GC dip of free
  blocks, the envelope line), and ``Clocks``: whether a host's tools read at one instant or
  each on its own cadence (``tool_clocks``), each host's clock error (``clock_skew_s``), and
  the what-if shifts of one tool's sample instants;
- ``telemetry.mix``: which format carries which drive's and node's series (``--format-mix``:
  ``default``, or ``world`` with every supported format), and the names of extra NICs;
- ``telemetry.render``: the tool outputs ``ckptwatch.sources`` has no renderer for (nvme-cli
  smart-log JSON, OCP text, sysfs snapshots, node_exporter scrapes, DLIO per-rank stats).

Physics kept on purpose: GC multiplies media writes over host writes and keeps the controller busy
even with no host I/O (busy time never outruns the clock); pause frames land on the NICs of the
nodes in the incident's scope, integrated over the part of each sample interval the incident
covers, so a short checkpoint inside a long interval still sees them; checkpoint writes themselves
cause small, harmless pause and metadata bumps. Cumulative counters never go below zero and only
fall at a labelled NIC counter reset, where they restart from about zero.
"""
