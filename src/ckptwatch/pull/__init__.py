"""Pull telemetry from where clusters already keep it: a Prometheus server's HTTP API
(``promapi``: requests; ``prometheus``: discovery, chunking, rows into the lake)."""
