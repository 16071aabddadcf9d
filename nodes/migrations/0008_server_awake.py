from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('nodes', '0007_server_devices'),
    ]

    operations = [
        migrations.AddField(
            model_name='rpcserver',
            name='awake',
            field=models.CharField(blank=True, help_text='Whether the laptop is kept awake while this server runs (systemd-inhibit, caffeinate), or why not.', max_length=200),
        ),
    ]
