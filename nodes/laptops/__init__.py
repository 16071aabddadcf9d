"""A laptop's life in the panel: added (registration), changed (changes), found again at a new address (refind),
removed (removal); holds declares the hooks through which deployments above say what a laptop holds."""
