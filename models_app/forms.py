from django import forms


class RegisterPathForm(forms.Form):
    path = forms.CharField(max_length=1000, label="Path of a GGUF file on the panel's machine",
                           help_text="For big files already here, e.g. /models/llama-3-70b.Q4_K_M.gguf.")
    name = forms.SlugField(max_length=80, required=False, help_text="Optional; taken from the file name.")
