"""What a durable peer keeps on disk (``--data DIR``, issue 42): `log` is the record log and the data
folder's lock and identity. The protocol side (what must be durable before what is sent) is the core's."""
