from django.urls import path

from models_app import views

app_name = "models"
urlpatterns = [
    path("", views.model_list, name="list"),
    path("<slug:name>/", views.model_detail, name="detail"),
]
