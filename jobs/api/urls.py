"""/api/: the panel's REST API for scripts."""

from django.urls import path

from jobs.api import views

urlpatterns = [
    path("jobs/", views.jobs, name="api-jobs"),
    path("jobs/<int:pk>/", views.job_detail, name="api-job"),
    path("jobs/<int:pk>/cancel/", views.job_cancel, name="api-job-cancel"),
    path("deployments/", views.deployments, name="api-deployments"),
    path("nodes/", views.nodes, name="api-nodes"),
]
