"""`trioka chaos run` (docs/chaos.md): clients and faults against a cluster, and the checker of
what the clients saw.

- The run, on trio and with I/O: `run` (one run, start to verdict, on a local cluster of its
  own or the compose cluster), `workload` (the clients, recording a History), `nemesis` (does
  and heals each fault through a `NodeControl` port) and its backends `local` (signals by pid,
  network namespaces) and `docker` (containers).
- The pure parts, no trio and no cluster client (an import-linter contract): `schedule` (the
  seeded fault schedule) and `check/`, the history of what clients did and saw (`history`; as
  JSON Lines, read and written by `history_files`) and the checkers that judge it (`checker`,
  `checker_order`, `anomalies`, `availability`)."""
