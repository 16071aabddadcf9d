"""What page tests stand on without a LAN: a signed-in test client, and a host key for laptops that are only
rows (nothing listens at their addresses)."""

from django.test import Client

HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGZha2VrZXlmYWtla2V5ZmFrZWtleWZha2VrZXlmYWtl"


def client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client
