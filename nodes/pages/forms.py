from django import forms
from django.conf import settings
from django.core import signing

from clusterpanel.kit.units import exact_size, parse_size
from nodes.models import Node
from nodes.probing.devices import listed_devices
from nodes.remote import ssh

SIGNING_SALT = "clusterpanel.nodes.host-key"


AUTH_CHOICES = [
    ("password", "Password, used once to add the panel's key (like ssh-copy-id)"),
    ("panel_key", "The panel's key is already in the laptop's authorized_keys"),
    ("private_key", "A private key the laptop already accepts"),
]


class SecretTextarea(forms.Textarea):
    """Never puts a submitted secret back into the page, even when the form is shown again with errors."""

    def format_value(self, value):
        return None


class AsSent:
    """The fields that reach command lines reach the model's validators as sent: a space or a line break around
    one is refused in words, as every other door (the API, addnode) refuses it, instead of being cut off here."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for name in ("name", "host", "username", "install_dir"):
            self.fields[name].strip = False


class AddNodeForm(AsSent, forms.ModelForm):
    """Step one: where the laptop is. The panel then fetches its host key for the admin to confirm."""

    auth = forms.ChoiceField(choices=AUTH_CHOICES, widget=forms.RadioSelect, initial="password",
                             label="How the panel logs in")

    class Meta:
        model = Node
        fields = ["name", "host", "port", "username", "connection", "install_dir"]
        help_texts = {"name": "A short name, e.g. lab-3.", "host": "Address or host name on the LAN.",
                      "port": "Its SSH server's port. A Windows laptop: its WSL2 Ubuntu's (see below), e.g. 2222.",
                      "install_dir": "Where the runtime and its caches go on the laptop."}
        labels = {"install_dir": "Install folder"}

    # The name, host, user name and folder are checked by the model's validators (nodes/models.py), which
    # the form runs too: they reach command lines, so every door must refuse the same values.
    def clean_install_dir(self) -> str:
        folder = self.cleaned_data["install_dir"]
        return folder.rstrip("/") or folder


class ConfirmNodeForm(AddNodeForm):
    """Step two: the fingerprint was shown; the secret, if any, is asked for only now."""

    signed_host_key = forms.CharField(widget=forms.HiddenInput)
    password = forms.CharField(required=False, widget=forms.PasswordInput(render_value=False),
                               help_text="Used once to install the panel's key, then forgotten.")
    private_key = forms.CharField(required=False, widget=SecretTextarea(attrs={"rows": 6}),
                                  help_text="Stored encrypted; never shown again.")

    class Meta(AddNodeForm.Meta):
        widgets = {field: forms.HiddenInput for field in AddNodeForm.Meta.fields}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["auth"].widget = forms.HiddenInput()

    def clean_signed_host_key(self) -> str:
        try:
            return signing.loads(self.cleaned_data["signed_host_key"], salt=SIGNING_SALT, max_age=900)
        except signing.BadSignature:
            raise forms.ValidationError("The confirmation expired; start again.") from None

    def clean(self):
        data = super().clean()
        if data.get("auth") == "password" and not data.get("password"):
            self.add_error("password", "Enter the laptop user's password.")
        if data.get("auth") == "private_key":
            try:
                ssh.load_private_key(data.get("private_key") or "")
            except ssh.SSHError as exc:
                self.add_error("private_key", str(exc))
        return data


def sign_host_key(key: str) -> str:
    return signing.dumps(key, salt=SIGNING_SALT)


GB = 1 << 30


class EditNodeForm(AsSent, forms.ModelForm):
    """What an admin may change of a laptop once added. Memory is in GiB here and in bytes on the model."""

    usable_gb = forms.FloatField(
        required=False, min_value=0.25, max_value=4096, label="Usable memory (GiB)",
        help_text="What the planner may fill on this laptop. Empty: measured (free memory minus the reserve).")
    reserve_gb = forms.FloatField(
        min_value=0, max_value=1024, label="Memory reserve (GiB)",
        help_text="Kept free for the laptop's own use when the usable memory is measured.")
    devices_off = forms.MultipleChoiceField(
        required=False, widget=forms.CheckboxSelectMultiple, label="Devices kept out of plans",
        help_text="Ticked devices hold no layers, e.g. a GPU that also drives the screen. The laptop's devices are "
                  "what its runtime listed when last probed.")
    cache_cap = forms.CharField(
        required=False, max_length=40, label="Cache cap",
        help_text="How much of the laptop's disk the rpc-server's tensor cache and the panel's downloads may take, "
                  "e.g. 40 GiB or 500 GB; the least recently used files no deployment needs go first.")

    class Meta:
        model = Node
        fields = ["name", "host", "port", "username", "connection", "install_dir", "pipeline_order"]
        labels = {"install_dir": "Install folder", "pipeline_order": "Pipeline order"}
        help_texts = AddNodeForm.Meta.help_texts

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        node = self.instance
        self.initial.setdefault("usable_gb", round(node.usable_memory / GB, 2) if node.usable_memory else None)
        self.initial.setdefault("reserve_gb", round(node.memory_reserve / GB, 2))
        self.initial.setdefault("devices_off", list(node.devices_off))
        self.initial.setdefault("cache_cap", exact_size(node.cache_cap) if node.cache_cap else "")
        self.fields["cache_cap"].help_text += (f" Empty: {settings.CACHE_CAP_PERCENT}% of the room they could have "
                                               "(what they hold plus the free disk).")
        names = [device.name for device in listed_devices(node)]
        self.fields["devices_off"].choices = [(name, name) for name in dict.fromkeys([*names, *node.devices_off])]
        self.fields["devices_off"].error_messages["invalid_choice"] = (
            f"%(value)s is not one of this laptop's devices ({', '.join(names)}); probe it to list them again.")

    def clean_devices_off(self) -> list[str]:
        off = self.cleaned_data["devices_off"]
        names = [device.name for device in listed_devices(self.instance)]
        if names and set(names) <= set(off):
            raise forms.ValidationError("Keep at least one device in plans, or the laptop holds no layers at all; "
                                        "to leave the laptop out, do not choose it when planning.")
        return off

    def clean_install_dir(self) -> str:
        folder = self.cleaned_data["install_dir"]
        return folder.rstrip("/") or folder

    def clean_cache_cap(self) -> int | None:
        text = self.cleaned_data["cache_cap"]
        if not text:
            return None
        try:
            return parse_size(text)
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from None

    def save(self, commit: bool = True) -> Node:
        node = super().save(commit=False)
        usable = self.cleaned_data.get("usable_gb")
        node.usable_memory = round(usable * GB) if usable else None
        node.memory_reserve = round(self.cleaned_data["reserve_gb"] * GB)
        node.devices_off = self.cleaned_data.get("devices_off") or []
        node.cache_cap = self.cleaned_data.get("cache_cap")
        if commit:
            node.save()
        return node
