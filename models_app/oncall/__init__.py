"""Models on call: loaded when asked for, unloaded when idle, within their pool's laptops (service)."""
