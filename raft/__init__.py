"""trioka raft package: the metadata log.

`local_log.LocalMetadataLog` is the single-node metadata log of a standalone broker; the Raft
core (`core/`, pure) and its trio driver come with issue 4.
"""
