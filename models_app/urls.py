from django.urls import path

from models_app.pages import model_views as views
from models_app.pages import oncall_card as oncall_views
from models_app.pages import plan_views

app_name = "models"
urlpatterns = [
    path("", views.model_list, name="list"),
    path("plan/", plan_views.plan_page, name="plan"),
    path("deployments/", plan_views.deployment_list, name="deployments"),
    path("deployments/new/", plan_views.create_deployment, name="deploy"),
    path("deployments/<int:pk>/", plan_views.deployment_page, name="deployment"),
    path("deployments/<int:pk>/stop/", plan_views.stop_deployment, name="stop"),
    path("deployments/<int:pk>/remove/", plan_views.remove_deployment, name="remove"),
    path("deployments/<int:pk>/redeploy/", plan_views.deploy_again, {"ready_only": False}, name="redeploy"),
    path("deployments/<int:pk>/replan/", plan_views.deploy_again, {"ready_only": True}, name="replan"),
    path("deployments/<int:pk>/verify/", plan_views.verify_deployment, name="verify"),
    path("deployments/<int:pk>/default/", plan_views.make_default, name="default"),
    path("deployments/<int:pk>/drafting/", plan_views.drafting, name="drafting"),
    path("deployments/<int:pk>/jobs/", views.running_jobs, name="running-jobs"),
    path("<slug:name>/", views.model_detail, name="detail"),
    path("<slug:name>/rename/", views.rename_model, name="rename"),
    path("<slug:name>/delete/", views.delete_model, name="delete"),
    path("<slug:name>/on-call/", oncall_views.save, name="on-call"),
    path("<slug:name>/on-call/off/", oncall_views.take_off, name="off-call"),
]
