"""The models', plans' and deployments' pages, forms and live socket: thin views over the rooms below."""
