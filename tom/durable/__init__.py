"""What a durable peer keeps on disk (``--data DIR``; docs/design/durable-peers.md): `log` is the record log and the data
folder's lock and identity. The protocol side (what must be durable before what is sent) is the core's."""
