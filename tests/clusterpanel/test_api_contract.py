"""The REST API keeps its contract: schemathesis reads the live schema from the real web server and sends
every operation generated inputs, fitting the schema and not, with a real lab admin's token. No answer may be
a 500, and every answer must match the schema: its status documented, its body the declared shape.

Left out, because their inputs are places on the network: registering a laptop and scanning a host key
(schemathesis would have the panel connect to whatever address it makes up; tests/nodes/test_laptops_api.py
registers the simulated ones), and changing a laptop (its address may change). The panel holds no laptop
here, so every other laptop operation answers 404 as documented.

Not asked: that every schema-valid request is accepted (schemathesis's positive_data_acceptance). Some rules
are not the schema's to say — a chat needs messages and a completion a prompt, max_tokens fits the
deployment's context, names are unique, a file must parse — so those answer 400 naming the field; the
opposite check stays (data the schema refuses must be refused).

(schemathesis's own pytest plugin does not run under pytest 9, so each operation's strategy is driven here
with Hypothesis directly; the checks are schemathesis's.)"""

import re

import hypothesis
import hypothesis.errors
import pytest
import schemathesis
from schemathesis.generation.modes import GenerationMode
from schemathesis.specs.openapi.checks import positive_data_acceptance

from clusterpanel.accounts.models import ApiToken
from models_app.models import Deployment, DeploymentStatus
from tests.jobs.standins import ready_deployment

pytestmark = pytest.mark.timeout(1200)
REACHES_OUT = {("POST", "/api/nodes/"), ("POST", "/api/nodes/host-key/"), ("PATCH", "/api/nodes/{name}/")}
EXAMPLES = 12  # per operation and mode: 20 took 165 s of a worker on a loaded run, 12 cover each operation still


def test_no_500_and_every_answer_matches_the_schema(web_server, transactional_db, alice):
    ready_deployment()
    schema = schemathesis.openapi.from_url(f"{web_server}/api/schema/")
    # Every case carries a real token (below), so the bearer scheme the schema declares is not generated: a case
    # "without" it would be sent with it. Answers without a token: tests/clusterpanel/test_api_tokens.py.
    schema.config.generation.update(with_security_parameters=False)
    operations = [result.ok() for result in schema.get_all_operations()]
    tested, problems = [], []
    for operation in operations:
        if (operation.method.upper(), operation.path) in REACHES_OUT:
            continue
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            if not Deployment.objects.filter(status=DeploymentStatus.READY).exists():  # stopped by an operation
                ready_deployment()
            tested.append(f"{operation.method.upper()} {operation.path} ({mode})")
            try:
                exercise(operation, mode, web_server, alice)
            except hypothesis.errors.Unsatisfiable:  # nothing of that mode to make (a free-text path name)
                tested.pop()
            except (Exception, BaseExceptionGroup) as exc:  # every operation is tried; all failures told together
                problems.append(f"{operation.method.upper()} {operation.path} ({mode}): {first_lines(exc)}")
    assert len(tested) >= 60, tested
    assert not problems, "\n\n".join(problems)


def exercise(operation, mode: GenerationMode, web_server: str, alice) -> None:
    @hypothesis.given(case=operation.as_strategy(generation_mode=mode))
    @hypothesis.settings(max_examples=EXAMPLES, deadline=None, database=None,
                         suppress_health_check=list(hypothesis.HealthCheck), derandomize=True)
    def run(case) -> None:
        key = ApiToken.issue(alice, "contract")[1]  # each case its own: one may revoke a token
        case.call_and_validate(base_url=web_server, headers={"Authorization": f"Bearer {key}"}, timeout=30,
                               excluded_checks=[positive_data_acceptance])

    run()


def first_lines(exc: Exception) -> str:
    text = re.sub(r"\n\s*\n", "\n", str(exc)).strip()
    return "\n".join(text.splitlines()[:14])
