"""Messages are sent by task name (jobs/task_messages.py), so nothing but this test notices a renamed task or a
changed argument list: each message must reach a registered task that accepts its arguments."""

import inspect

from clusterpanel.kit.celery import app
from jobs import task_messages


def sent_by_each_sender(monkeypatch) -> list[tuple[str, tuple, dict]]:
    sent = []
    monkeypatch.setattr(task_messages, "send", lambda task, args, **options: sent.append((task, args, options)))
    task_messages.run_job(1, "engine.1")
    task_messages.confirm_stop(1, 0, 30)
    task_messages.load_engine(1, "engine.1")
    task_messages.recover_deployment(1, ["demo-2"], [3, 4])
    task_messages.verify_deployment(1, 2)
    task_messages.prepare_on_call(1)
    return sent


def test_it_sends_every_message_to_a_task_that_takes_its_arguments(monkeypatch):
    app.loader.import_default_modules()
    sent = sent_by_each_sender(monkeypatch)
    senders = [name for name, value in vars(task_messages).items() if inspect.isfunction(value) and name != "send"]
    assert len(sent) == len(senders), "every sender is exercised here"
    for task, args, options in sent:
        assert task in app.tasks, f"{task} is not a registered task"
        inspect.signature(app.tasks[task].run).bind(*args)  # raises TypeError on a wrong argument list
        assert set(options) <= {"queue", "countdown"}
        assert app.tasks[task].ignore_result, "messages are sent without waiting for a result"


def test_it_refuses_a_wrong_argument_list(monkeypatch):
    """The check above can fail: a task given one argument too many does not bind."""
    app.loader.import_default_modules()
    try:
        inspect.signature(app.tasks[task_messages.RUN_JOB].run).bind(1, 2)
    except TypeError:
        return
    raise AssertionError("a wrong argument list was accepted")
