from django import forms
from django.conf import settings
from django.template.defaultfilters import filesizeformat

from clusterpanel.kit.idfields import IdChoiceField
from jobs.queue import queueing
from models_app.models import Deployment


class DeploymentChoice(IdChoiceField):
    def label_from_instance(self, deployment: Deployment) -> str:
        return f"{deployment.model.name} #{deployment.pk} (context {deployment.ctx})"


class BatchUploadForm(forms.Form):
    deployment = DeploymentChoice(Deployment.objects.none(), empty_label=None)
    file = forms.FileField(label="Batch file (.jsonl or .csv)")

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["deployment"].queryset = queueing.usable_deployments()  # the default first, as everywhere

    def clean_file(self):
        upload = self.cleaned_data["file"]
        if upload.size > settings.BATCH_MAX_BYTES:
            raise forms.ValidationError(f"The file is {filesizeformat(upload.size)}; a batch file may be at most "
                                        f"{filesizeformat(settings.BATCH_MAX_BYTES)}. Split it into smaller files.")
        return upload
