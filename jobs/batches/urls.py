from django.urls import path

from jobs.batches import views

app_name = "batches"
urlpatterns = [
    path("", views.batch_list, name="list"),
    path("<int:pk>/", views.batch_page, name="detail"),
    path("<int:pk>/cancel/", views.cancel_batch, name="cancel"),
    path("<int:pk>/delete/", views.delete_batch, name="delete"),
    path("<int:pk>/results.jsonl", views.download, {"kind": "jsonl"}, name="jsonl"),
    path("<int:pk>/results.csv", views.download, {"kind": "csv"}, name="csv"),
]
