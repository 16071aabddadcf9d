"""Models on call and replicas: woken by a request, routed among, and short of laptops."""
