from django.urls import path

from jobs import chat_views

app_name = "chat"
urlpatterns = [
    path("", chat_views.chat_home, name="home"),
    path("new/", chat_views.new_conversation, name="new"),
    path("<int:pk>/", chat_views.conversation_page, name="conversation"),
    path("<int:pk>/send/", chat_views.send, name="send"),
    path("jobs/<int:pk>/", chat_views.answer, name="answer"),
    path("jobs/<int:pk>/stop/", chat_views.stop, name="stop"),
]
