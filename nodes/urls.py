from django.urls import path

from nodes.pages import list_views, views

app_name = "nodes"
urlpatterns = [
    path("", list_views.node_list, name="list"),
    path("actions/", list_views.act_on_laptops, name="bulk"),
    path("find-moved/", list_views.find_moved, name="find-moved"),
    path("add/", views.node_add, name="add"),
    path("metrics/recent.json", views.recent_metrics, name="recent-metrics"),
    path("doctor/", views.doctor, name="doctor"),
    path("doctor/check-again/", views.check_again, name="check-again"),
    path("<slug:name>/", views.node_detail, name="detail"),
    path("<slug:name>/doctor/", views.doctor, name="node-doctor"),
    path("<slug:name>/edit/", views.edit_node, name="edit"),
    path("<slug:name>/remove/", views.remove_node, name="remove"),
    path("<slug:name>/actions/<str:kind>/", views.node_action, name="action"),
    path("<slug:name>/actions/<int:pk>/log/", views.build_log, name="build-log"),
    path("<slug:name>/approve-host-key/", views.approve_host_key, name="approve-host-key"),
    path("<slug:name>/rpc-server/", views.rpc_server, name="rpc-server"),
    path("<slug:name>/rpc-server/<int:port>/log/", views.rpc_server_log, name="rpc-server-log"),
]
