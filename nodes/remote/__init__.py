"""The one door to the laptops over SSH: commands, streams, file pushes and the logins that open them
(ssh, transfer, logins). Imports the toolkit and nodes.models only; every other room reaches a laptop through it."""
