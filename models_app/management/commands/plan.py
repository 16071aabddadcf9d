"""Plan a model across laptops and print every mode's plan and the chosen one's split; deploys nothing."""

from django.core.management.base import BaseCommand, CommandError

from clusterpanel.kit.units import size
from models_app.management.commands.deploy import slots_count
from models_app.models import GgufModel
from models_app.pages.plan_views import MODES, PlanForm, plans_for
from models_app.planning import words as plan_words
from models_app.planning.records import left_out_words, people_at_once
from nodes.models import Node


class Command(BaseCommand):
    help = "Plan MODEL across laptops (the Plan page's numbers, as text); nothing is deployed."

    def add_arguments(self, parser):
        parser.add_argument("model", help="the model's name in the library")
        parser.add_argument("--nodes", default="", help="laptops, comma-separated (default: every ready laptop)")
        parser.add_argument("--order", default="", help="laptop names first to last, comma-separated")
        parser.add_argument("--ctx", type=int, default=2048, help="tokens each person's conversation may hold")
        parser.add_argument("--slots", type=slots_count, default=None,
                            help="people served at once, 1 to 64 (default: the most of 8, 4, 2, 1 that fit)")
        parser.add_argument("--mode", default="fastest", choices=MODES)
        parser.add_argument("--head-layers", action="store_true", help="let the panel's machine hold layers too")

    def handle(self, model, nodes, order, ctx, slots, mode, head_layers, **options):
        form = self.form(model, nodes, order, ctx, slots, mode, head_layers)
        chosen_nodes = form.chosen_nodes()
        if form.left_out:
            self.stdout.write(self.style.WARNING(left_out_words(form.left_out)))
        results = plans_for(form.cleaned_data, chosen_nodes)
        for name, record in results.items():
            said = record.get("error") or (f"{record['tokens_per_second']} tokens/s, {record['slots']} slots, "
                                           f"bottleneck {record['bottleneck_label']}; {record['spread']}")
            self.stdout.write(f"{name + (' (chosen)' if name == mode else ''):<18} {said}")
        chosen = results[mode]
        if "error" in chosen:
            raise CommandError(f"No {mode} plan: {chosen['error']}")
        self.show(chosen)

    def form(self, model, nodes, order, ctx, slots, mode, head_layers) -> PlanForm:
        """The Plan page's own form, from names: the same checks, the same words."""
        found = GgufModel.objects.filter(name=model).first()
        if found is None:
            raise CommandError(f"No model named {model!r}; see `manage.py addmodel` or the Models page.")
        names = [name.strip() for name in nodes.split(",") if name.strip()]
        chosen = dict(Node.objects.filter(name__in=names).values_list("name", "pk"))
        missing = [name for name in names if name not in chosen]
        if missing:
            raise CommandError(f"No laptop named {', '.join(missing)}.")
        form = PlanForm({"model": found.pk, "nodes": [chosen[name] for name in names], "ctx": ctx,
                         "slots": "" if slots is None else slots, "head_layers": head_layers, "mode": mode,
                         "order": order})
        if not form.is_valid():
            raise CommandError(" ".join(message for messages in form.errors.values() for message in messages))
        return form

    def show(self, plan: dict) -> None:
        self.stdout.write(f"{plan['mode']}: {people_at_once(plan)}")
        self.stdout.write(plan["bottleneck_said"])
        for note in plan["notes"]:
            self.stdout.write(note)
        for row in plan_words.split_rows(plan):
            mark = "  <- bottleneck" if row["bottleneck"] else ""
            self.stdout.write(f"  {row['position']:>3} {row['machine']:<14} {row['layers']:<44} "
                              f"{size(row['memory']):>10} of {size(row['usable']):<10} {row['ms']:6.1f} ms{mark}")
        self.stdout.write(f"llama.cpp: n_gpu_layers={plan['n_gpu_layers']} "
                          f"tensor_split={','.join(map(str, plan['tensor_split']))}")
