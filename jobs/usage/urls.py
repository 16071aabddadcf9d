from django.urls import path

from jobs.usage import views

app_name = "usage"
urlpatterns = [
    path("", views.usage_page, name="page"),
]
