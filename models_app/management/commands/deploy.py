"""Plan a model across laptops, prepare and verify the deployment, and print the plan."""

import argparse

from django.core.management.base import BaseCommand, CommandError

from models_app.deploying import deploy
from models_app.models import DeploymentStatus, GgufModel
from models_app.planning.records import MAX_SLOTS, PlanningError, people_at_once, why_these_slots
from nodes.models import Node

MiB = 2**20


def slots_count(text: str) -> int:
    """--slots: a whole number from 1 to 64, refused in words otherwise."""
    if not text.strip().isdigit() or not 1 <= int(text) <= MAX_SLOTS:
        raise argparse.ArgumentTypeError(f"must be a whole number from 1 to {MAX_SLOTS} (how many people the "
                                         f"model serves at once), not {text!r}")
    return int(text)


class Command(BaseCommand):
    help = "Deploy MODEL across laptops; waits until it is ready or has failed. Needs the supervisor (make run)."

    def add_arguments(self, parser):
        parser.add_argument("model", help="the model's name in the library")
        parser.add_argument("--nodes", required=True, help="laptops in pipeline order, comma-separated")
        parser.add_argument("--ctx", type=int, default=2048, help="tokens each person's conversation may hold")
        parser.add_argument("--slots", type=slots_count, default=None,
                            help="people served at once, 1 to 64, each with up to --ctx tokens "
                                 "(default: the most of 8, 4, 2, 1 that fit)")
        parser.add_argument("--mode", default="fastest", choices=["fastest", "memory", "even"])
        parser.add_argument("--head-layers", action="store_true", help="let the panel's machine hold layers too")
        parser.add_argument("--measure-peak", action="store_true",
                            help="verify with a prompt that fills the context and measure memory at that peak")
        parser.add_argument("--no-preseed", dest="preseed", action="store_false",
                            help="do not copy the tensors into the laptops' rpc-server caches before the load")

    def handle(self, model, nodes, ctx, mode, head_layers, preseed, slots, **options):
        found = GgufModel.objects.filter(name=model).first()
        if found is None:
            raise CommandError(f"No model named {model!r}; see `manage.py addmodel` or the Models page.")
        names = [name.strip() for name in nodes.split(",") if name.strip()]
        chosen = {node.name: node for node in Node.objects.filter(name__in=names)}
        missing = [name for name in names if name not in chosen]
        if missing:
            raise CommandError(f"No laptop named {', '.join(missing)}.")
        try:
            deployment = deploy.create(found, [chosen[n] for n in names], ctx, mode, head_layers=head_layers,
                                       preseed=preseed, slots=slots)
        except PlanningError as exc:
            raise CommandError(f"Nothing was started: {exc}") from None
        self.show(deployment.plan)
        if slots is None:
            self.stdout.write(f"  {why_these_slots(deployment.slots, deployment.ctx)}")
        deploy.prepare(deployment, options["measure_peak"])
        deployment.refresh_from_db()
        if deployment.status != DeploymentStatus.READY:
            raise CommandError(f"Deployment #{deployment.pk} {deployment.status}: {deployment.status_detail}")
        self.stdout.write(self.style.SUCCESS(f"Deployment #{deployment.pk} is ready: {deployment.status_detail}"))

    def show(self, plan: dict) -> None:
        self.stdout.write(f"Plan ({plan['mode']}): about {plan['tokens_per_second']} tokens/s, "
                          f"bottleneck {plan.get('bottleneck_label', plan['bottleneck'])}; "
                          f"n_gpu_layers={plan['n_gpu_layers']} "
                          f"tensor_split={plan['tensor_split']}")
        self.stdout.write(f"  {people_at_once(plan)}")
        for stage in plan["stages"]:
            if stage["count"] or stage["machine"] == "head":
                memory, last = sum(stage["memory"].values()) / MiB, stage["first"] + stage["count"] - 1
                layers = f"layers {stage['first']}-{last}" if stage["count"] else "embedding only"
                self.stdout.write(f"  {stage.get('label', stage['machine']):<12} {layers:<16} {memory:8.0f} MiB "
                                  f"of {stage['usable'] / MiB:.0f} MiB usable")
