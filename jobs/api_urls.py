"""/api/: the panel's REST API for scripts."""

from django.urls import path

from jobs import api_views

urlpatterns = [
    path("jobs/", api_views.jobs, name="api-jobs"),
    path("jobs/<int:pk>/", api_views.job_detail, name="api-job"),
    path("jobs/<int:pk>/cancel/", api_views.job_cancel, name="api-job-cancel"),
    path("deployments/", api_views.deployments, name="api-deployments"),
    path("nodes/", api_views.nodes, name="api-nodes"),
]
