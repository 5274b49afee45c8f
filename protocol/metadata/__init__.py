"""Metadata records and the MetadataImage/MetadataDelta built by replaying them (KRaft's model).

`records` holds the records every metadata backend writes (a single-node local log, ZooKeeper,
Raft); `image` holds the immutable picture of the cluster they describe and `delta` the change
between two pictures, which is how brokers learn what to lead, follow or delete.
"""
