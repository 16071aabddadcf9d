"""Static files stored under names that change with their content, so that browsers may keep them for good."""

from whitenoise.storage import CompressedManifestStaticFilesStorage


class HashedStaticStorage(CompressedManifestStaticFilesStorage):
    # The pages' scripts are ES modules importing each other ("./charts.js"): their imports are rewritten to
    # the hashed names too, or every chart page would ask again for the modules it imports.
    support_js_module_import_aggregation = True
