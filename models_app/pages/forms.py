from django import forms

from clusterpanel.kit.idfields import IdMultipleChoiceField
from clusterpanel.kit.natural import natural_sorted
from models_app.models import GgufModel, ModelStatus, OnCall, WhenShort
from models_app.oncall.service import Settings
from nodes.models import Node


class RegisterPathForm(forms.Form):
    path = forms.CharField(max_length=1000, label="Path of a GGUF file on the panel's machine",
                           help_text="For big files already here, e.g. /models/llama-3-70b.Q4_K_M.gguf.")
    name = forms.SlugField(max_length=80, required=False, help_text="Optional; taken from the file name.")


class OnCallForm(forms.Form):
    """A model's on-call settings, as the model's page edits them; the numbers are checked by
    models_app/oncall/service.py (with the planner), which words every refusal."""

    any_laptop = forms.BooleanField(required=False, initial=True, label="Any ready laptop",
                                    help_text="Its pool is every laptop that is ready when a request wakes it.")
    pool = IdMultipleChoiceField(Node.objects.all(), widget=forms.CheckboxSelectMultiple, required=False,
                                 label="Or these laptops")
    idle_minutes = forms.IntegerField(initial=15, label="Idle minutes",
                                      help_text="Unloaded after this long without a job; the next request wakes it.")
    replicas = forms.IntegerField(initial=1, help_text="Deployments loaded side by side on separate laptops.")
    ctx = forms.IntegerField(initial=2048, label="Context (tokens)")
    slots = forms.IntegerField(initial=1, help_text="People each deployment serves at once.")
    when_short = forms.ChoiceField(choices=WhenShort.choices, initial=WhenShort.WAIT, label="When laptops are short",
                                   help_text="A deployment with jobs is never stopped.")
    draft_tokens = forms.IntegerField(initial=0, required=False, label="Draft tokens",
                                      help_text="Speculative decoding: the most tokens an answer drafts a step "
                                                "(0: off).")
    draft_model = forms.ModelChoiceField(GgufModel.objects.filter(status=ModelStatus.READY, pooling=0),
                                         to_field_name="name", required=False, empty_label="n-grams of the answer",
                                         label="Drafted by", help_text="A small model with the same vocabulary, on "
                                                                      "the head.")

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["pool"].label_from_instance = lambda node: node.name
        self.fields["draft_model"].label_from_instance = lambda model: model.name

    def settings(self) -> Settings:
        data = self.cleaned_data
        pool = None if data["any_laptop"] else natural_sorted(list(data["pool"]), lambda node: node.name)
        return Settings(pool, data["idle_minutes"], data["replicas"], data["ctx"], data["slots"], data["when_short"],
                        data["draft_tokens"] or 0, data["draft_model"])

    @classmethod
    def of(cls, on_call: OnCall | None) -> "OnCallForm":
        if on_call is None:
            return cls()
        return cls(initial={"any_laptop": on_call.any_laptop, "pool": list(on_call.pool.all()),
                            "idle_minutes": on_call.idle_minutes, "replicas": on_call.replicas, "ctx": on_call.ctx,
                            "slots": on_call.slots, "when_short": on_call.when_short,
                            "draft_tokens": on_call.draft_tokens, "draft_model": on_call.draft_model})
