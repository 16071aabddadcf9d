from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from clusterpanel import api, views
from clusterpanel.accounts import token_views, user_views
from jobs.api import scrape

urlpatterns = [
    path("", views.home, name="home"),
    path("start/", views.landing, name="landing"),
    path("dashboard/deployments/", views.dashboard_deployments, name="dashboard-deployments"),
    path("status/", views.system_status, name="system-status"),
    path("nodes/", include("nodes.urls")),
    path("models/", include("models_app.urls")),
    path("chat/", include("jobs.chat.urls")),
    path("jobs/batches/", include("jobs.batches.urls")),
    path("healthz", views.healthz, name="healthz"),
    path("metrics", scrape.scrape, name="metrics"),
    path("favicon.ico", views.favicon, name="favicon"),
    path("login/", auth_views.LoginView.as_view(redirect_authenticated_user=True), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("account/tokens/", token_views.tokens, name="api-tokens"),
    path("account/tokens/<int:pk>/revoke/", token_views.revoke, name="api-token-revoke"),
    path("users/", user_views.user_list, name="users"),
    path("users/limits/", user_views.set_default_limits, name="default-limits"),
    path("users/<int:pk>/limits/", user_views.set_user_limits, name="user-limits"),
    path("users/tokens/<int:pk>/limits/", user_views.set_token_limits, name="token-limits"),
    path("usage/", include("jobs.usage.urls")),
    path("users/<int:pk>/role/", user_views.set_role, name="user-role"),
    path("users/<int:pk>/password/", user_views.reset_password, name="user-password"),
    path("users/<int:pk>/disable/", user_views.disable, name="user-disable"),
    path("users/<int:pk>/enable/", user_views.enable, name="user-enable"),
    path("api/", include((api.urlpatterns(), "api"), namespace="api")),
    path("v1/", include("jobs.api.openai_urls")),
    path("ollama/", include("jobs.api.ollama_urls")),
    path("account/password/", auth_views.PasswordChangeView.as_view(success_url="/"), name="password_change"),
    # One login page for everything, the admin site included.
    path("admin/login/", views.admin_login, name="admin-login"),
    path("admin/", admin.site.urls),
]

handler500 = views.server_error
