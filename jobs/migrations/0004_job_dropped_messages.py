from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('jobs', '0003_queue_order_index'),
    ]

    operations = [
        migrations.AddField(
            model_name='job',
            name='dropped_messages',
            field=models.PositiveIntegerField(default=0),
        ),
    ]
