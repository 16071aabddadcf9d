from django.urls import path

from jobs.chat import views

app_name = "chat"
urlpatterns = [
    path("", views.chat_home, name="home"),
    path("new/", views.new_conversation, name="new"),
    path("<int:pk>/", views.conversation_page, name="conversation"),
    path("<int:pk>/send/", views.send, name="send"),
    path("<int:pk>/rename/", views.rename, name="rename"),
    path("<int:pk>/delete/", views.delete, name="delete"),
    path("jobs/<int:pk>/", views.answer, name="answer"),
    path("jobs/<int:pk>/stop/", views.stop, name="stop"),
]
