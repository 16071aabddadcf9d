from django.apps import AppConfig


class ClusterpanelConfig(AppConfig):
    name = "clusterpanel"
    verbose_name = "Cluster panel"
