from django.urls import path

from jobs import batch_views

app_name = "batches"
urlpatterns = [
    path("", batch_views.batch_list, name="list"),
    path("<int:pk>/", batch_views.batch_page, name="detail"),
    path("<int:pk>/cancel/", batch_views.cancel_batch, name="cancel"),
    path("<int:pk>/results.jsonl", batch_views.download, {"kind": "jsonl"}, name="jsonl"),
    path("<int:pk>/results.csv", batch_views.download, {"kind": "csv"}, name="csv"),
]
