"""The request handlers, one module per API family (Kafka's KafkaApis, split by concern).

`router.ApiRouter` is what the TCP server calls: it maps each ApiKey to the handler of its
family. The families (produce, fetch, offsets, metadata, admin, configs, inter_broker; the group
APIs live in broker.group) each take only the collaborators they use and register their
`handlers()`; broker.node wires them (`Broker._add_api_handlers`), except inter_broker (ZK
mode's), which the metadata feed adds (broker.metadata_feeds.zk).
"""
