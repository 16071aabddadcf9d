"""A laptop's ggml-rpc-servers: starting and stopping them (rpcserver), the handshake that tells one is there
(handshake), the supervisor that keeps them running (supervisor, serving), and their tensor cache on disk (cache,
cachecap, cleaning). Uses remote/, runtime/ and laptops/holds for what deployments above make of a laptop."""
