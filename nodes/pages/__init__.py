"""The laptops' pages, forms and live socket: thin views over the rooms below."""
